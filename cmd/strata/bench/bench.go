// Package bench is the `strata bench` command tree: one node's prefill
// and decode against the machine's memory bandwidth (bench), a link
// between two processes on this host (bench link), and tensor-parallel
// decode against one node (bench tp).
//
// The command must be mounted as `bench` under the root of the running
// executable: bench link and bench tp --procs start that executable
// (os.Executable) again as `bench link --child ...` and `bench tp member`.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"strata/internal/membw"
	"strata/runtime/gguf"
	"strata/runtime/gpu"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/tensor"
)

// benchReport is what strata bench measures; --json prints it as is.
type benchReport struct {
	Model   string `json:"model"`
	Kernels string `json:"kernels"`
	KVType  string `json:"kv_type"`
	Threads int    `json:"threads"`
	// GPU is the device of the matrix products (--gpu), "" for none.
	GPU          string `json:"gpu,omitempty"`
	PromptTokens int    `json:"prompt_tokens"`
	GenTokens    int    `json:"gen_tokens"`

	PrefillSeconds     float64   `json:"prefill_s"`
	PrefillTokensPerS  float64   `json:"prefill_tokens_per_s"`
	DecodeSeconds      float64   `json:"decode_s"`
	DecodeTokensPerS   float64   `json:"decode_tokens_per_s"`
	WeightBytesPerTok  int64     `json:"weight_bytes_per_token"`
	ModelWeightBytes   int64     `json:"model_weight_bytes"`
	BandwidthGBs       float64   `json:"bandwidth_gb_s"`
	BandwidthSamples   []float64 `json:"bandwidth_samples_gb_s"`
	DecodeCeiling      float64   `json:"decode_ceiling_tokens_per_s"`
	DecodeFraction     float64   `json:"decode_fraction_of_ceiling"`
	DecodeWeightGBs    float64   `json:"decode_weight_gb_s"`
	PrefillCores       float64   `json:"prefill_cores_used"`
	DecodeCores        float64   `json:"decode_cores_used"`
	PeakRSSBytes       int64     `json:"peak_rss_bytes"`
	BandwidthBufferMiB int       `json:"bandwidth_buffer_mib"`
}

// Command returns the `strata bench` command and its subcommands link and
// tp, for the root command to add.
func Command() *cobra.Command {
	var (
		modelPath    string
		threads      int
		promptTokens int
		genTokens    int
		asJSON       bool
		bufMiB       int
		cpuProfile   string
		kvType       string
		gpuDevice    string
		gpuLayers    string
	)
	cmd := &cobra.Command{
		Use:   "bench --model FILE [--threads N] [--prompt-tokens P] [--gen-tokens G] [--kv-type T] [--json]",
		Short: "Measure prompt processing and generation speed against this machine's memory bandwidth",
		Long: `bench loads a GGUF model, processes a prompt of P tokens as one batch, then
generates G tokens one at a time (greedy), and measures this machine's memory
read bandwidth in the same run (every thread streaming a buffer far larger
than the caches). Generation reads each weight it uses once per token (every
matrix of a dense model; of a mixture-of-experts layer, only the experts its
router picks), so its ceiling is bandwidth / weight bytes read per token, as
counted over the generated tokens; bench reports the fraction reached.
Bandwidth is measured before and after the model runs (the best of the two
counts); peak RSS covers the model run, not the bandwidth buffer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" {
				return fmt.Errorf("--model is required (a path to a .gguf file)")
			}
			if promptTokens < 1 || genTokens < 1 {
				return fmt.Errorf("--prompt-tokens and --gen-tokens must be at least 1")
			}
			if threads <= 0 {
				threads = runtime.GOMAXPROCS(0)
			}
			kv, err := model.ParseKVType(kvType)
			if err != nil {
				return fmt.Errorf("--kv-type: %w", err)
			}
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			layers, err := gpu.ParseLayers(gpuLayers)
			if err != nil {
				return err
			}
			r, err := runBench(modelPath, threads, promptTokens, genTokens, bufMiB, kv, gpuDevice, layers)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			fmt.Fprintf(out, "model      %s (%s kernels, %d threads, %s KV cache)\n", r.Model, r.Kernels, r.Threads, r.KVType)
			if r.GPU != "" {
				fmt.Fprintf(out, "gpu        %s\n", r.GPU)
			}
			fmt.Fprintf(out, "prefill    %d tokens in %.3fs: %.1f tokens/s\n", r.PromptTokens, r.PrefillSeconds, r.PrefillTokensPerS)
			fmt.Fprintf(out, "decode     %d tokens in %.3fs: %.2f tokens/s (%.1f GB/s of weights)\n", r.GenTokens, r.DecodeSeconds, r.DecodeTokensPerS, r.DecodeWeightGBs)
			fmt.Fprintf(out, "bandwidth  %.1f GB/s read (%d threads, %d MiB buffer)\n", r.BandwidthGBs, r.Threads, r.BandwidthBufferMiB)
			fmt.Fprintf(out, "ceiling    %.2f tokens/s (%.1f MB of weights read per token, of %.1f MB); decode reaches %.0f%%\n",
				r.DecodeCeiling, float64(r.WeightBytesPerTok)/1e6, float64(r.ModelWeightBytes)/1e6, 100*r.DecodeFraction)
			fmt.Fprintf(out, "cores used %.2f in prefill, %.2f in decode (CPU time / wall time; below --threads when other processes compete)\n", r.PrefillCores, r.DecodeCores)
			fmt.Fprintf(out, "peak RSS   %.1f MiB\n", float64(r.PeakRSSBytes)/(1<<20))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", "", "path to a GGUF model")
	f.IntVar(&threads, "threads", 0, "worker threads (0: all cores)")
	f.IntVar(&promptTokens, "prompt-tokens", 128, "prompt tokens, processed as one batch")
	f.IntVar(&genTokens, "gen-tokens", 64, "tokens to generate")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	f.StringVar(&kvType, "kv-type", "f16", "KV cache type: "+model.KVTypes)
	f.StringVar(&gpuDevice, "gpu", gpu.DeviceOff, "Vulkan device for the matrix products: off, auto or a device index (lavapipe, a Vulkan device on the CPU, is no GPU's speed)")
	f.StringVar(&gpuLayers, "gpu-layers", "all", "with --gpu, how many of the last layers' matrix products run on the device: N or all")
	f.IntVar(&bufMiB, "bandwidth-mib", 1024, "size of the bandwidth buffer in MiB (keep it far above the L3 cache)")
	cmd.AddCommand(benchLinkCmd())
	cmd.AddCommand(benchTPCmd())
	return cmd
}

func runBench(path string, threads, promptTokens, genTokens, bufMiB int, kv model.KVType, gpuDevice string, gpuLayers int) (*benchReport, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	m, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		return nil, err
	}
	if err := m.SetKVType(kv); err != nil {
		return nil, err
	}
	prof, err := model.ProfileOf(f)
	if err != nil {
		return nil, err
	}
	pool := tensor.NewPool(threads)
	defer pool.Close()
	capacity := promptTokens + genTokens + 1
	st := m.NewState(pool, promptTokens, capacity)
	cache := m.NewCache(capacity)
	r := &benchReport{Model: path, Kernels: tensor.Kernels(), KVType: kv.String(), Threads: threads, PromptTokens: promptTokens,
		GenTokens: genTokens, ModelWeightBytes: int64(prof.TotalBytes()), BandwidthBufferMiB: bufMiB}
	acc, err := gpu.Accelerate(m, gpuDevice, gpuLayers)
	if err != nil {
		return nil, err
	}
	if acc != nil {
		defer acc.Close()
		st.Accelerate(acc)
		r.GPU = acc.String()
	}

	// A deterministic prompt of ordinary token ids (past the specials).
	prompt := make([]int, promptTokens)
	for i := range prompt {
		prompt[i] = 3 + (i*7919)%max(1, m.Vocab-3)
	}
	// Bandwidth is measured before and after the model runs, and the best
	// is the machine's: other processes may compete for memory at either
	// moment. The peak RSS restarts after the first buffer is freed.
	bw0, err := membw.Measure(membw.Options{Threads: threads, Bytes: bufMiB << 20})
	if err != nil {
		return nil, err
	}
	membw.ResetPeakRSS()

	// Warm up: one token reads every weight, so page faults of the mapped
	// file are not timed.
	if err := st.Embed(prompt[:1]); err != nil {
		return nil, err
	}
	if err := st.Forward(cache, 1); err != nil {
		return nil, err
	}
	if _, err := st.LogitsOf(0); err != nil {
		return nil, err
	}
	cache.Len = 0

	start, cpu0 := time.Now(), membw.CPUTime()
	if err := st.Embed(prompt); err != nil {
		return nil, err
	}
	if err := st.Forward(cache, promptTokens); err != nil {
		return nil, err
	}
	logits, err := st.LogitsOf(promptTokens - 1)
	if err != nil {
		return nil, err
	}
	prefill, cpu1 := time.Since(start), membw.CPUTime()

	// The weights each generated token reads, counted by the State: a
	// dense model's every matrix, a mixture-of-experts layer's chosen
	// experts only (so the average over the tokens generated).
	start, read0 := time.Now(), st.BytesRead()
	for range genTokens {
		if err := st.Embed([]int{sample.Greedy(logits)}); err != nil {
			return nil, err
		}
		if err := st.Forward(cache, 1); err != nil {
			return nil, err
		}
		if logits, err = st.LogitsOf(0); err != nil {
			return nil, err
		}
	}
	decode, cpu2 := time.Since(start), membw.CPUTime()
	r.WeightBytesPerTok = (st.BytesRead() - read0) / int64(genTokens)
	r.PrefillCores = (cpu1 - cpu0).Seconds() / prefill.Seconds()
	r.DecodeCores = (cpu2 - cpu1).Seconds() / decode.Seconds()
	r.PeakRSSBytes = membw.PeakRSS()
	if err := st.AcceleratorErr(); err != nil {
		return nil, fmt.Errorf("the device failed (%w); the run finished on the CPU", err)
	}

	bw1, err := membw.Measure(membw.Options{Threads: threads, Bytes: bufMiB << 20})
	if err != nil {
		return nil, err
	}
	bw := max(bw0, bw1)
	r.BandwidthSamples = []float64{bw0, bw1}
	r.PrefillSeconds = prefill.Seconds()
	r.PrefillTokensPerS = float64(promptTokens) / prefill.Seconds()
	r.DecodeSeconds = decode.Seconds()
	r.DecodeTokensPerS = float64(genTokens) / decode.Seconds()
	r.DecodeWeightGBs = r.DecodeTokensPerS * float64(r.WeightBytesPerTok) / 1e9
	r.BandwidthGBs = bw
	r.DecodeCeiling = bw * 1e9 / float64(r.WeightBytesPerTok)
	r.DecodeFraction = r.DecodeTokensPerS / r.DecodeCeiling
	return r, nil
}
