package catalog

import (
	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// Info is what a model's GGUF header says about it.
type Info struct {
	Architecture string
	// Quantization is llama.cpp's name for general.file_type ("Q4_K_M"),
	// else the type holding most of the weight bytes.
	Quantization string
	Layers       int
	Params       uint64 // weights, summed over every tensor
}

// Describe reads the header of a complete model (only metadata pages of
// the files are touched).
func Describe(m Model) (Info, error) {
	f, err := gguf.Open(m.Paths[0])
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	md := f.Metadata()
	info := Info{Architecture: md.Architecture(), Layers: int(md.ArchUint("block_count", 0))}
	bytes := map[tensor.Type]uint64{}
	for _, t := range f.Tensors() {
		info.Params += t.Elements()
		bytes[t.Type] += t.Size
	}
	if ft, ok := md.Uint("general.file_type"); ok && ft < uint64(len(fileTypes)) && fileTypes[ft] != "" {
		info.Quantization = fileTypes[ft]
	} else {
		var most uint64
		for t, n := range bytes {
			if n > most || (n == most && t.String() < info.Quantization) {
				most, info.Quantization = n, t.String()
			}
		}
	}
	return info, nil
}

// fileTypes are llama.cpp's names of general.file_type values (llama_ftype).
var fileTypes = [...]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
	38: "MXFP4_MOE",
}
