package tensor

import (
	"fmt"
	"math"
)

// Matrix is a weight matrix: Rows rows of Cols elements, row-major, in ggml
// layout (a GGUF tensor with dims ne=[Cols, Rows]). Each row is Cols/BlockSize
// whole blocks of Type. Data is borrowed, often an mmap'd file region; the
// kernels only read it.
type Matrix struct {
	Type       Type
	Rows, Cols int
	Data       []byte
}

// NewMatrix returns a Matrix over data after checking that t is Supported,
// rows and cols are non-negative, cols is a whole number of blocks and
// len(data) is exactly rows rows of cols elements.
func NewMatrix(t Type, rows, cols int, data []byte) (Matrix, error) {
	if !Supported(t) {
		return Matrix{}, fmt.Errorf("%w: %v", ErrUnsupported, t)
	}
	if rows < 0 || cols < 0 {
		return Matrix{}, fmt.Errorf("%w: negative shape %dx%d", ErrSize, rows, cols)
	}
	bs, bb, _ := layout(t)
	if cols%bs != 0 {
		return Matrix{}, fmt.Errorf("%w: %d columns is not a whole number of %v blocks of %d", ErrSize, cols, t, bs)
	}
	if cols/bs > math.MaxInt/bb {
		return Matrix{}, fmt.Errorf("%w: %d columns of %v do not fit in memory", ErrSize, cols, t)
	}
	rowBytes := cols / bs * bb
	if rows != 0 && rowBytes > len(data)/rows || rowBytes*rows != len(data) {
		return Matrix{}, fmt.Errorf("%w: %dx%d %v needs %d bytes per row, data has %d bytes", ErrSize, rows, cols, t, rowBytes, len(data))
	}
	return Matrix{Type: t, Rows: rows, Cols: cols, Data: data}, nil
}

// RowBytes returns the bytes one row occupies.
func (m Matrix) RowBytes() int {
	bs, bb, ok := layout(m.Type)
	if !ok {
		panic("tensor: matrix of unsupported type " + m.Type.String())
	}
	return m.Cols / bs * bb
}

// Row returns the encoded bytes of row i (a subslice of Data).
func (m Matrix) Row(i int) []byte {
	rb := m.RowBytes()
	return m.Data[i*rb : (i+1)*rb : (i+1)*rb]
}

// RowRange returns rows [lo, hi) of m as a matrix of its own (a view of
// the same bytes, no copy): one expert of a 3-D expert tensor, one head's
// rows, one worker's share of a product.
func (m Matrix) RowRange(lo, hi int) Matrix {
	rb := m.RowBytes()
	return Matrix{Type: m.Type, Rows: hi - lo, Cols: m.Cols, Data: m.Data[lo*rb : hi*rb : hi*rb]}
}

// EmbedRow dequantizes row i into dst, which must hold Cols elements
// (an embedding lookup: token i's vector).
func (m Matrix) EmbedRow(i int, dst []float32) {
	if len(dst) != m.Cols {
		panic(fmt.Sprintf("tensor: EmbedRow: len(dst)=%d, want %d", len(dst), m.Cols))
	}
	decode(m.Type, m.Row(i), dst)
}
