package sample

import (
	"math"
	"math/bits"
	"slices"
)

// A key packs a candidate into one integer whose ascending order is the
// filters' order: higher logit first, lower token id on ties. The high 32
// bits are the logit's bits mapped to descending unsigned order, the low 32
// bits the id. Sorting and selecting keys therefore needs no comparison
// function, and the strict total order makes the filters, and so the draw,
// deterministic.
type key = uint64

func makeKey(logit float32, id int) key {
	if logit == 0 {
		logit = 0 // -0 and +0 compare equal, so they must tie on id
	}
	b := math.Float32bits(logit)
	if b>>31 == 0 {
		b |= 1 << 31 // non-negative: above all negatives
	} else {
		b = ^b // negative: larger magnitude lower
	}
	return key(^b)<<32 | key(id)
}

// keyLogit inverts makeKey's logit part.
func keyLogit(k key) float32 {
	b := ^uint32(k >> 32)
	if b>>31 == 1 {
		b &^= 1 << 31
	} else {
		b = ^b
	}
	return math.Float32frombits(b)
}

func keyID(k key) int { return int(uint32(k)) }

// topKHeapMax is the largest TopK that topKScan handles; larger ones build
// every candidate and use selectTop.
const topKHeapMax = 1024

// topKScan appends to c (empty, with capacity len(logits)) the keys of the k
// best drawable logits, in no particular order. It keeps them in a max-heap
// of keys, whose root is the worst one kept, so that most logits cost one
// comparison and nothing else: O(len(logits) + k*log(k)*log(len/k)) for
// typical logits, O(len(logits)*log(k)) at worst.
func topKScan(c []key, logits []float32, k int) []key {
	var worst float32 // logit at the root once the heap is full
	for i, l := range logits {
		if len(c) == k {
			// Ids ascend, so a tie with the worst kept loses; NaN and
			// -Inf fail the comparison too.
			if !(l > worst) {
				continue
			}
			c[0] = makeKey(l, i)
			siftDown(c, 0)
			worst = keyLogit(c[0])
			continue
		}
		if l != l || math.IsInf(float64(l), -1) {
			continue
		}
		c = append(c, makeKey(l, i))
		siftUp(c, len(c)-1)
		if len(c) == k {
			worst = keyLogit(c[0])
		}
	}
	return c
}

// siftUp and siftDown maintain the max-heap order h[(i-1)/2] >= h[i].
func siftUp(h []key, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent] >= h[i] {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func siftDown(h []key, i int) {
	for {
		child := 2*i + 1
		if child >= len(h) {
			return
		}
		if r := child + 1; r < len(h) && h[r] > h[child] {
			child = r
		}
		if h[i] >= h[child] {
			return
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
}

// selectTop reorders c so that c[:k] holds its k smallest keys (the k best
// candidates) in no particular order: quickselect with a median-of-three
// pivot, falling back to sorting the remaining range if it recurses too
// deep. Expected cost O(len(c)).
func selectTop(c []key, k int) {
	if k <= 0 || k >= len(c) {
		return
	}
	lo, hi := 0, len(c) // the boundary at k lies strictly inside [lo, hi)
	budget := 2 * bits.Len(uint(len(c)))
	for hi-lo > 16 {
		if budget == 0 {
			slices.Sort(c[lo:hi])
			return
		}
		budget--
		p := lo + partition(c[lo:hi])
		switch {
		case p == k || p+1 == k:
			return
		case p > k:
			hi = p
		default:
			lo = p + 1
		}
	}
	slices.Sort(c[lo:hi])
}

// partition moves a median-of-three pivot to its final index i, with
// smaller keys in c[:i] and larger in c[i+1:], and returns i. len(c) >= 3.
func partition(c []key) int {
	n := len(c)
	a, m, z := 0, n/2, n-1
	if c[m] < c[a] {
		c[a], c[m] = c[m], c[a]
	}
	if c[z] < c[m] {
		c[m], c[z] = c[z], c[m]
		if c[m] < c[a] {
			c[a], c[m] = c[m], c[a]
		}
	}
	// c[a] <= c[m] <= c[z]; the median becomes the pivot at the end.
	c[m], c[z] = c[z], c[m]
	pivot := c[z]
	i := 0
	for j := range z {
		if c[j] < pivot {
			c[i], c[j] = c[j], c[i]
			i++
		}
	}
	c[i], c[z] = c[z], c[i]
	return i
}
