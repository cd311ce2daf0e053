package model_test

import (
	"bytes"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

// A crafted key_length makes layers*heads*(key+value)*4 wrap to a small
// KV size per token, so placement would think a session costs nothing.
func TestProfileKVOverflow(t *testing.T) {
	f, err := gguf.Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata().Clone()
	// 5 layers * 4 KV heads * (2^62 + 2^62) * 4 wraps to 0 in 64 bits.
	for _, k := range []string{"llama.attention.key_length", "llama.attention.value_length"} {
		if err := md.Set(k, uint64(1)<<62); err != nil {
			t.Fatal(err)
		}
	}
	var ts []gguf.WriteTensor
	for _, x := range f.Tensors() {
		ts = append(ts, gguf.WriteTensor{Name: x.Name, Type: x.Type, Dims: x.Dims, Data: f.Data(x)})
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, md, ts); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse("crafted.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.ProfileOf(g)
	if err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("ProfileOf: KV bytes per token %d, error %v; want a refusal", p.KVBytesPerToken, err)
	}
}
