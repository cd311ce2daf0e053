package sample

import "math"

// expNeg returns e^x for x <= 0 within 1e-8 relative error, about twice as
// fast as math.Exp; the filters and the softmax call it once or twice per
// candidate. Below -708 (where math.Exp turns subnormal) it returns 0.
//
// e^x = 2^t with t = x*log2(e) = n + f, n an integer and |f| <= 1/2, so
// 2^f = e^(f*ln 2) with |f*ln 2| <= 0.347, where the degree-7 Taylor
// polynomial is within 0.347^8/8! < 1e-8; 2^n is built from its exponent bits.
func expNeg(x float64) float64 {
	if x < -708 {
		return 0
	}
	t := x * math.Log2E
	n := int(t - 0.5) // t <= 0, so truncation rounds t to nearest
	y := (t - float64(n)) * math.Ln2
	p := 1 + y*(1+y*(1.0/2+y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720+y*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(n+1023)<<52)
}
