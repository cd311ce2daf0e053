package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strata/internal/units"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

func init() { extraCommands = append(extraCommands, synthCmd) }

func synthCmd() *cobra.Command {
	var (
		shape, typeName, out string
		o                    synth.Options
		maxSize              string
		split                int
		peaked               bool
	)
	cmd := &cobra.Command{
		Use:   "synth --shape NAME --type T -o FILE",
		Short: "Write a random-weight GGUF model of a real shape (for benchmarks and placement)",
		Long: "synth writes a model with the tensor table of a real model and random weights,\n" +
			"plus a synthetic vocabulary so it loads anywhere a GGUF loads. Its text is noise.\n" +
			"Shapes: " + strings.Join(model.ShapeNames(), ", ") + ".\n" +
			"Models too large to fill (over --max-size) need --sparse: zero weights written as\n" +
			"file holes, the real size on paper and almost nothing on disk.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := model.LookupShape(shape)
			if err != nil {
				return err
			}
			s.Peaked = s.Peaked || peaked
			if o.Type, err = tensor.ParseType(typeName); err != nil {
				return err
			}
			if out == "" {
				return fmt.Errorf("-o FILE is required")
			}
			if o.MaxBytes, err = units.ParseBytes(maxSize); err != nil {
				return fmt.Errorf("--max-size: %w", err)
			}
			start := time.Now()
			if split > 1 {
				parts, err := synth.WriteSplit(out, s, o, split)
				if err != nil {
					return err
				}
				out = fmt.Sprintf("%s (%d parts)", parts[0], len(parts))
			} else if err := synth.WriteFile(out, s, o); err != nil {
				return err
			}
			if o.Layers > 0 {
				s.Layers = o.Layers
			}
			kind := "random"
			if o.Sparse {
				kind = "sparse (zero)"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s, %d layers, %s weights, %s in %v\n",
				out, s.Name, s.Layers, kind, units.Bytes(synth.Size(s, o.Type)), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&shape, "shape", "", "model shape: "+strings.Join(model.ShapeNames(), ", "))
	f.StringVar(&typeName, "type", "Q8_0", "weight type: F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS")
	f.StringVarP(&out, "output", "o", "", "output file")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same file)")
	f.BoolVar(&o.Sparse, "sparse", false, "write zero weights as holes (for models too large to fill)")
	f.IntVar(&o.Layers, "layers", 0, "override the layer count (0: the shape's)")
	f.BoolVar(&peaked, "peaked", false, "carry each token's identity to the output head in a residual channel, as the tiny test shapes do:\n"+
		"the top logit is then decided by the last token, so a target and its draft of fewer layers (--layers, same seed) agree\n"+
		"as often as a trained pair does (speculative decoding benchmarks)")
	f.StringVar(&maxSize, "max-size", "64GB", "refuse filled files larger than this")
	f.IntVar(&split, "split", 0, "write N parts named as llama.cpp's gguf-split does: FILE-00001-of-0000N.gguf ... (FILE is -o without .gguf)")
	return cmd
}
