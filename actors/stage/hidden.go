package stage

import (
	"encoding/binary"
	"fmt"
	"math"

	"strata/messages"
	"strata/runtime/tensor"
)

// encodeHidden serializes activations, little-endian.
func encodeHidden(x []float32, t messages.HiddenType) []byte {
	if t == messages.HiddenType_HIDDEN_F16 {
		b := make([]byte, 2*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint16(b[2*i:], tensor.FP32ToFP16(v))
		}
		return b
	}
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// decodeHidden fills x from a peer's bytes, checking the size first.
func decodeHidden(x []float32, b []byte, t messages.HiddenType) error {
	size := 4
	if t == messages.HiddenType_HIDDEN_F16 {
		size = 2
	} else if t != messages.HiddenType_HIDDEN_F32 {
		return fmt.Errorf("unknown hidden type %d", t)
	}
	if len(b) != size*len(x) {
		return fmt.Errorf("hidden states of %d bytes, expected %d", len(b), size*len(x))
	}
	for i := range x {
		if size == 2 {
			x[i] = tensor.FP16ToFP32(binary.LittleEndian.Uint16(b[2*i:]))
		} else {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		// A NaN or an infinity from a peer would poison every later
		// position of the session's KV cache: an error, not input.
		if v := float64(x[i]); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("hidden state %d of %d is %v", i, len(x), x[i])
		}
	}
	return nil
}
