package synth

import (
	"path/filepath"
	"reflect"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// TestProfileOfFileMatchesShape checks that placement sees the same bytes
// per layer and KV bytes per token whether it reads a file (ProfileOf) or
// a shape nobody downloaded (Shape.Profile): for every known shape, MoE
// and MLA included, on a sparse 3-layer file.
func TestProfileOfFileMatchesShape(t *testing.T) {
	for _, name := range model.ShapeNames() {
		t.Run(name, func(t *testing.T) {
			s := model.Shapes[name]
			s.Layers = 3
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := WriteFile(path, s, Options{Type: tensor.Q4_K, Sparse: true}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := model.ProfileOf(f)
			if err != nil {
				t.Fatal(err)
			}
			want := s.Profile(tensor.Q4_K)
			if !reflect.DeepEqual(got.LayerBytes, want.LayerBytes) || got.EmbedBytes != want.EmbedBytes ||
				got.HeadBytes != want.HeadBytes || got.KVBytesPerToken != want.KVBytesPerToken || got.TiedOutput != want.TiedOutput {
				t.Fatalf("file profile %+v\nshape profile %+v", got, want)
			}
		})
	}
}
