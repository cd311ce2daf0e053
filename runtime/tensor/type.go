package tensor

import (
	"fmt"
	"math"
	"strings"
)

// Type is a ggml tensor element type, numbered as in ggml.h and GGUF files.
// Quantized types store elements in fixed-size blocks; Info describes them.
type Type uint32

// The ggml type ids. Gaps are ids that ggml retired; they are rejected.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
)

// TypeInfo is the storage layout of a Type: BlockSize elements are stored
// in BlockBytes bytes.
type TypeInfo struct {
	Name       string
	BlockSize  int // elements per block
	BlockBytes int // bytes per block
}

// typeInfo lists every type a GGUF file may name, so files holding types we
// cannot compute with still open (inspect, placement, byte-range serving).
var typeInfo = map[Type]TypeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 2 + 16},
	Q4_1:    {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"Q8_0", 32, 2 + 32},
	Q8_1:    {"Q8_1", 32, 4 + 32},
	Q2_K:    {"Q2_K", 256, 256/16 + 256/4 + 2 + 2},
	Q3_K:    {"Q3_K", 256, 256/8 + 256/4 + 12 + 2},
	Q4_K:    {"Q4_K", 256, 2 + 2 + 12 + 256/2},
	Q5_K:    {"Q5_K", 256, 2 + 2 + 12 + 256/8 + 256/2},
	Q6_K:    {"Q6_K", 256, 256/2 + 256/4 + 256/16 + 2},
	Q8_K:    {"Q8_K", 256, 4 + 256 + 256/16*2},
	IQ2_XXS: {"IQ2_XXS", 256, 2 + 256/8*2},
	IQ2_XS:  {"IQ2_XS", 256, 2 + 256/8*2 + 256/32},
	IQ3_XXS: {"IQ3_XXS", 256, 2 + 256/4 + 256/8},
	IQ1_S:   {"IQ1_S", 256, 2 + 256/8 + 256/16},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ3_S:   {"IQ3_S", 256, 2 + 256/4 + 256/8 + 256/32 + 4},
	IQ2_S:   {"IQ2_S", 256, 2 + 256/4 + 256/16},
	IQ4_XS:  {"IQ4_XS", 256, 2 + 2 + 256/64 + 256/2},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 256/8 + 256/16 + 256/32},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 2 + 4*13},
	TQ2_0:   {"TQ2_0", 256, 2 + 64},
}

// Info returns the layout of t and whether t is a known type.
func (t Type) Info() (TypeInfo, bool) {
	info, ok := typeInfo[t]
	return info, ok
}

// Known reports whether t is a type a GGUF file may hold.
func (t Type) Known() bool { _, ok := typeInfo[t]; return ok }

// BlockSize is the number of elements per block (1 for plain types, 0 if unknown).
func (t Type) BlockSize() int { return typeInfo[t].BlockSize }

// BlockBytes is the number of bytes per block (0 if unknown).
func (t Type) BlockBytes() int { return typeInfo[t].BlockBytes }

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t Type) String() string {
	if info, ok := typeInfo[t]; ok {
		return info.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseType returns the Type named name: ggml's names in any case
// ("Q4_K", "q4_k").
func ParseType(name string) (Type, error) {
	for t, info := range typeInfo {
		if strings.EqualFold(info.Name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown type %q", name)
}

// RowBytes returns the bytes needed for n elements of type t, or an error
// when n is not a whole number of blocks or t is unknown.
func (t Type) RowBytes(n int64) (int64, error) {
	info, ok := typeInfo[t]
	if !ok {
		return 0, fmt.Errorf("tensor: unknown type %d", uint32(t))
	}
	if n < 0 || n%int64(info.BlockSize) != 0 {
		return 0, fmt.Errorf("tensor: %d elements is not a whole number of %s blocks of %d", n, info.Name, info.BlockSize)
	}
	if blocks := n / int64(info.BlockSize); blocks > math.MaxInt64/int64(info.BlockBytes) {
		return 0, fmt.Errorf("tensor: %d elements of %s do not fit in 2^63 bytes", n, info.Name)
	}
	return n / int64(info.BlockSize) * int64(info.BlockBytes), nil
}
