package modelinfo

import (
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

func TestRead(t *testing.T) {
	f, err := gguf.Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the description keeps copies
	if in.Arch != "llama" || in.Config.Layers != 5 || in.Profile.TotalBytes() != in.SizeBytes || in.NoTP != "" && in.ExpertUnits != 0 {
		t.Errorf("%+v", in)
	}
	// stories260K's tokenizer: "Once" is one token after BOS.
	if ids := in.Tokenizer.Encode("Once", true, false); len(ids) != 2 || ids[0] != in.Tokenizer.BOS() {
		t.Errorf("Encode(Once) = %v", ids)
	}
	if v := in.Vocab(); v == nil || v != in.Vocab() {
		t.Error("Vocab is built once")
	}
}

func TestReadRefusesAFileWithoutAModel(t *testing.T) {
	f, err := gguf.Open(testdata.Path(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Read(f); err == nil {
		t.Error("a vocabulary-only file described as a model")
	}
}

// InvariantRows from the file's tensor types is the loaded model's.
func TestInvariantRowsWithoutLoading(t *testing.T) {
	for _, name := range []string{"gguf/stories260K.gguf", "gguf/llama-2-tiny-random.gguf"} {
		f, err := gguf.Open(testdata.Path(t, name))
		if err != nil {
			t.Fatal(err)
		}
		in, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(f, 0, in.Config.Layers)
		if err != nil {
			t.Fatal(err)
		}
		if in.InvariantRows != m.InvariantRows() {
			t.Errorf("%s: %d rows from the types, %d loaded", name, in.InvariantRows, m.InvariantRows())
		}
		f.Close()
	}
}
