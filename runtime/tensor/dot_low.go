package tensor

// The generic dots of Q2_K, Q3_K and IQ4_XS rows with Q8_K activations, in
// the lane arrangement the K-quant dots of dot_generic.go had before Q4_K,
// Q5_K and Q6_K became row-sequential: lane l
// holds the integer sum, over the 32-element groups of a super-block, of
// the sub-block scale times the dot of elements 4l..4l+3 of the group; one
// fma32 per lane and super-block scales it by the weight's and the
// activation's super-scales. They are the reference for the assembly.

// dotQ2_KGeneric is the dot of a Q2_K row with Q8_K activations (quants
// x, scales d, 16-sums bsums): the scales term as above (group c of 32
// elements has sub-blocks 2c and 2c+1, so lanes 0-3 take scale 2c and
// lanes 4-7 scale 2c+1), and the mins term sum_s m[s]*bsums[s] scaled by
// dmin*dx into a separate accumulator, subtracted at the end.
func dotQ2_KGeneric(w []byte, x []int8, d []float32, bsums []int16) float32 {
	nb := len(d)
	w, x, bsums = w[:nb*q2KBytes], x[:nb*qkK], bsums[:nb*16]
	var acc [8]float32
	var accm float32
	for b := range nb {
		blk := w[b*q2KBytes : (b+1)*q2KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[80:]))
		dmin := d[b] * FP16ToFP32(u16le(blk[82:]))
		sc, qs, xs, bs := blk[0:16], blk[16:80], x[qkK*b:qkK*(b+1)], bsums[16*b:16*b+16]
		var sumi [8]int32
		for c := range 8 {
			h, k := c/4, c%4
			for l := range 8 {
				var is int32
				for e := 4 * l; e < 4*l+4; e++ {
					q := qs[32*h+e] >> (2 * k) & 3
					is += int32(q) * int32(xs[32*c+e])
				}
				sumi[l] += int32(sc[2*c+l/4]&15) * is
			}
		}
		var msum int32
		for s := range 16 {
			msum += int32(sc[s]>>4) * int32(bs[s])
		}
		for l := range 8 {
			acc[l] = fma32(float32(sumi[l]), dd, acc[l])
		}
		accm = fma32(float32(msum), dmin, accm)
	}
	return hsum8(&acc) - accm
}

// dotQ3_KGeneric is the dot of a Q3_K row with Q8_K activations: quants
// q-4 in [-4, 3], sub-block scales sc-32 (lanes 0-3 of group c take scale
// 2c, lanes 4-7 scale 2c+1).
func dotQ3_KGeneric(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*q3KBytes], x[:nb*qkK]
	var acc [8]float32
	for b := range nb {
		blk := w[b*q3KBytes : (b+1)*q3KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[108:]))
		sc := q3KScales(blk[96:108])
		hm, qs, xs := blk[0:32], blk[32:96], x[qkK*b:qkK*(b+1)]
		var sumi [8]int32
		for c := range 8 {
			h, k := c/4, c%4
			for l := range 8 {
				var is int32
				for e := 4 * l; e < 4*l+4; e++ {
					q := qs[32*h+e]>>(2*k)&3 | (hm[e]>>c&1)<<2
					is += (int32(q) - 4) * int32(xs[32*c+e])
				}
				sumi[l] += (int32(sc[2*c+l/4]) - 32) * is
			}
		}
		for l := range 8 {
			acc[l] = fma32(float32(sumi[l]), dd, acc[l])
		}
	}
	return hsum8(&acc)
}

// dotIQ4_XSGeneric is the dot of an IQ4_XS row with Q8_K activations:
// levels iq4nlValues[index], one scale ls-32 per 32-element sub-block.
func dotIQ4_XSGeneric(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*iq4XSBytes], x[:nb*qkK]
	var acc [8]float32
	for b := range nb {
		blk := w[b*iq4XSBytes : (b+1)*iq4XSBytes]
		dd := d[b] * FP16ToFP32(u16le(blk))
		xs := x[qkK*b : qkK*(b+1)]
		var sumi [8]int32
		for j := range 8 {
			ls := int32(iq4XSScale(blk, j) - 32)
			qs := blk[8+16*j : 8+16*j+16]
			for l := range 8 {
				var is int32
				for e := 4 * l; e < 4*l+4; e++ {
					var q byte
					if e < 16 {
						q = qs[e] & 15
					} else {
						q = qs[e-16] >> 4
					}
					is += int32(iq4nlValues[q]) * int32(xs[32*j+e])
				}
				sumi[l] += ls * is
			}
		}
		for l := range 8 {
			acc[l] = fma32(float32(sumi[l]), dd, acc[l])
		}
	}
	return hsum8(&acc)
}
