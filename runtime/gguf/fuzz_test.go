package gguf

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader. Whatever parses must be
// internally consistent: every tensor view is in bounds, and writing the
// file back and reading it again gives the same metadata and tensors.
// Seeds: a small synthetic file and every real .gguf in the shared test
// data — whole when under 1.2 MB, else its first 64 KiB (the metadata
// starts there; multi-megabyte seeds slow the fuzzer to a crawl).
// Run: go test ./runtime/gguf -run '^$' -fuzz FuzzParse -fuzztime 10m
func FuzzParse(f *testing.F) {
	f.Add(tinyFile(f))
	for _, p := range allGGUF(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 1200<<10 {
			b = b[:64<<10]
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse("fuzz", data)
		if err != nil {
			if g != nil {
				t.Fatal("file returned with an error")
			}
			return
		}
		var ws []WriteTensor
		for _, tn := range g.Tensors() {
			d := g.Data(tn)
			if uint64(len(d)) != tn.Size {
				t.Fatalf("%s: view of %d bytes, size %d", tn.Name, len(d), tn.Size)
			}
			ws = append(ws, WriteTensor{Name: tn.Name, Type: tn.Type, Dims: tn.Dims, Data: d})
		}
		var buf bytes.Buffer
		md := g.Metadata()
		if err := Write(&buf, md, ws); err != nil {
			t.Fatalf("parsed file does not write back: %v", err)
		}
		h, err := Parse("again", buf.Bytes())
		if err != nil {
			t.Fatalf("written file does not parse: %v", err)
		}
		if !reflect.DeepEqual(md.KVs(), h.Metadata().KVs()) && !hasNaN(md) {
			t.Fatal("metadata changed in the round trip")
		}
		for i, tn := range h.Tensors() {
			if !bytes.Equal(h.Data(tn), ws[i].Data) {
				t.Fatalf("tensor %s changed in the round trip", tn.Name)
			}
		}
	})
}

// hasNaN reports whether a float value makes DeepEqual unusable.
func hasNaN(md *Metadata) bool {
	for _, kv := range md.KVs() {
		switch v := kv.Value.(type) {
		case float32:
			if v != v {
				return true
			}
		case float64:
			if v != v {
				return true
			}
		case Array:
			if v.Type == TypeFloat32 || v.Type == TypeFloat64 || v.Type == TypeArray {
				return true
			}
		}
	}
	return false
}
