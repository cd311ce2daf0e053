package synth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"strata/runtime/gguf"
	"strata/runtime/model"
)

// WriteSplit writes the model as a split GGUF of n parts, named and laid
// out as llama.cpp's gguf-split writes them: PREFIX-00001-of-0000N.gguf
// ... where PREFIX is path without ".gguf"; the first part carries the
// model's metadata, every part the split.* keys, and the tensors are cut
// in file order into parts of about equal bytes. It returns the part
// paths. The parts appear only once all are written.
func WriteSplit(path string, s model.Shape, o Options, n int) ([]string, error) {
	if o.Layers > 0 {
		s.Layers = o.Layers
	}
	specs := s.Tensors(o.Type)
	if n < 2 || n > len(specs) || n > 99999 {
		return nil, fmt.Errorf("synth: --split %d: want 2..%d parts (one tensor at least in each)", n, len(specs))
	}
	md, err := Metadata(s, o.Type)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, ts := range specs {
		total += ts.Bytes()
	}
	// Cut before the tensor that would carry a part past its share,
	// keeping one tensor at least for every later part.
	parts := make([][]gguf.WriteTensor, n)
	var acc uint64
	k := 0
	for i, ts := range specs {
		left := len(specs) - i
		if k < n-1 && len(parts[k]) > 0 && (acc+ts.Bytes()/2 > total*uint64(k+1)/uint64(n) || left == n-1-k) {
			k++
		}
		wt := gguf.WriteTensor{Name: ts.Name, Type: ts.Type, Dims: ts.Dims}
		if !o.Sparse {
			wt.WriteData = randomData(ts, s, o.Seed)
		}
		parts[k] = append(parts[k], wt)
		acc += ts.Bytes()
	}
	prefix := strings.TrimSuffix(path, filepath.Ext(path))
	var tmps, out []string
	defer func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}()
	for i, ts := range parts {
		pmd := gguf.NewMetadata()
		if i == 0 {
			pmd = md.Clone()
		}
		pmd.Set(gguf.KeySplitNo, uint16(i))
		pmd.Set(gguf.KeySplitCount, uint16(n))
		pmd.Set(gguf.KeySplitTensors, int32(len(specs)))
		tmp, err := os.CreateTemp(filepath.Dir(path), ".synth-*.gguf")
		if err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		tmps = append(tmps, tmp.Name())
		err = gguf.Write(tmp, pmd, ts)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("synth: part %d: %w", i+1, err)
		}
		out = append(out, gguf.SplitPath(prefix, i, n))
	}
	for i, t := range tmps {
		if err := os.Rename(t, out[i]); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	tmps = nil
	return out, nil
}
