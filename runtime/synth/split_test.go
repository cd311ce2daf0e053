package synth

import (
	"bytes"
	"path/filepath"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// A split model holds the same tensors, byte for byte, as the single file
// of the same seed, in parts named as llama.cpp names them.
func TestWriteSplitMatchesSingle(t *testing.T) {
	dir := t.TempDir()
	s := small
	s.Layers = 4
	o := Options{Type: tensor.Q8_0, Seed: 3}
	single := filepath.Join(dir, "one.gguf")
	if err := WriteFile(single, s, o); err != nil {
		t.Fatal(err)
	}
	parts, err := WriteSplit(filepath.Join(dir, "many.gguf"), s, o, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"many-00001-of-00003.gguf", "many-00002-of-00003.gguf", "many-00003-of-00003.gguf"}
	for i, p := range parts {
		if filepath.Base(p) != want[i] {
			t.Errorf("part %d is %s, want %s", i, filepath.Base(p), want[i])
		}
	}
	a, err := gguf.Open(single)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := gguf.Open(parts[1]) // any part opens the whole
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Paths()) != 3 || len(a.Tensors()) != len(b.Tensors()) {
		t.Fatalf("%d parts, %d vs %d tensors", len(b.Paths()), len(a.Tensors()), len(b.Tensors()))
	}
	perPart := make([]int, 3)
	for i, ta := range a.Tensors() {
		tb := b.Tensors()[i]
		if ta.Name != tb.Name || !bytes.Equal(a.Data(ta), b.Data(tb)) {
			t.Fatalf("tensor %d: %s vs %s differ", i, ta.Name, tb.Name)
		}
		perPart[tb.Split]++
	}
	for i, n := range perPart {
		if n == 0 {
			t.Errorf("part %d holds no tensor: %v", i+1, perPart)
		}
	}
	if a.Metadata().Architecture() != b.Metadata().Architecture() {
		t.Error("metadata of the first part differs")
	}
	if _, err := WriteSplit(filepath.Join(dir, "x.gguf"), s, o, 1000); err == nil {
		t.Error("more parts than tensors accepted")
	}
}
