package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"strata/internal/llamacpp"
	"strata/runtime/gguf"
	"strata/runtime/gpu"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

func init() { extraCommands = append(extraCommands, logitsCmd) }

func logitsCmd() *cobra.Command {
	var (
		path, ids  string
		kvType     string
		top, batch int
		threads    int
		asJSON     bool
		gf         gpuFlags
	)
	cmd := &cobra.Command{
		Use:   `logits --model FILE --ids "1 2 3 ..." [--top K] [--kv-type T] [--json]`,
		Short: "Print the top-K next-token logits after every position of a token sequence (teacher-forced)",
		Long: "logits runs the token ids through the model, one position at a time by default\n" +
			"(--batch N: prefill chunks of N), and prints the K largest logits predicting the\n" +
			"token after each position. --json prints the shape of ../shared/bench/llamacpp-logits.mjs,\n" +
			`{"positions": [{"argmax": ID, "top": [[ID, LOGIT], ...]}, ...]}, to compare with llama.cpp.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return fmt.Errorf("--model FILE is required")
			}
			seq, err := parseIDs(ids)
			if err != nil {
				return err
			}
			if top < 1 {
				return fmt.Errorf("--top %d: need at least 1", top)
			}
			kv, err := model.ParseKVType(kvType)
			if err != nil {
				return fmt.Errorf("--kv-type: %w", err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			cfg, err := model.ConfigOf(f.Metadata())
			if err != nil {
				return err
			}
			m, err := model.Load(f, 0, cfg.Layers)
			if err != nil {
				return err
			}
			if err := m.SetKVType(kv); err != nil {
				return err
			}
			pool := tensor.NewPool(threads)
			defer pool.Close()
			device, layers, err := gf.parse()
			if err != nil {
				return err
			}
			acc, err := gpu.Accelerate(m, device, layers)
			if err != nil {
				return err
			}
			var on model.Accelerator
			if acc != nil {
				defer acc.Close()
				on = acc
				fmt.Fprintf(cmd.ErrOrStderr(), "gpu: %s\n", acc)
			}
			var out llamacpp.Logits
			err = model.TeacherForcedOn(m, pool, on, seq, batch, func(_ int, logits []float32) {
				out.Positions = append(out.Positions, llamacpp.TopOf(logits, top))
			})
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			printLogits(cmd.OutOrStdout(), seq, &out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&path, "model", "", "GGUF model file")
	fl.StringVar(&ids, "ids", "", `token ids, separated by spaces or commas ("1 2 3")`)
	fl.IntVar(&top, "top", 5, "logits to print per position")
	fl.IntVar(&batch, "batch", 1, "tokens per forward pass (1: decode one position at a time)")
	fl.IntVar(&threads, "threads", 0, "compute threads (0: one per core)")
	fl.StringVar(&kvType, "kv-type", "f16", "KV cache type: "+model.KVTypes+" (the oracle script keeps llama.cpp's in f32)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	gf.add(fl)
	return cmd
}

// parseIDs reads token ids separated by spaces or commas.
func parseIDs(s string) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("--ids: no token ids given")
	}
	ids := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--ids: %q is not a token id", f)
		}
		ids[i] = n
	}
	return ids, nil
}

func printLogits(w io.Writer, ids []int, l *llamacpp.Logits) {
	for i, p := range l.Positions {
		fmt.Fprintf(w, "%4d  id %-6d ->", i, ids[i])
		for _, t := range p.Top {
			fmt.Fprintf(w, "  %d:%.4f", t.ID, t.Logit)
		}
		fmt.Fprintln(w)
	}
}
