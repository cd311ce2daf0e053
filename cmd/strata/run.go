package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strata/api"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/sample"
)

func init() { extraCommands = append(extraCommands, runCmd) }

func runCmd() *cobra.Command {
	var (
		modelPath string
		apiURL    string
		apiKey    string
		prompt    string
		maxTokens int
		threads   int
		ctxLen    int
		kvType    string
		seed      int64
		stops     []string
		params    sample.Params
		speculate string
		gf        gpuFlags
	)
	cmd := &cobra.Command{
		Use:   "run --model PATH|NAME [--api URL] [--prompt TEXT]",
		Short: "Generate text on this machine: the continuation on stdout, timings on stderr",
		Long: `run loads a GGUF model and continues the prompt. The prompt is encoded as
llama.cpp and llama2.c do (BOS, then the text). Sampling is greedy unless
--temperature is above 0; --seed makes sampled runs reproducible.

With --api, the prompt goes to a running node (strata node) and --model
names a model of the cluster (its file name without .gguf); the cluster
decides which nodes run which layers.

--speculate guesses tokens ahead and checks several in one forward pass:
ngram (earlier occurrences of the last tokens: repetitive text) or
draft:PATH (a small model of the same vocabulary). The text is the same
as without it, token for token, sampled or not; only the speed differs.
With --api, draft uses the node's draft model (strata node --speculate
draft:MODEL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" {
				return fmt.Errorf("--model is required (a path to a .gguf file, or a model name with --api)")
			}
			if seed < 0 {
				seed = rand.Int64N(1 << 31)
			}
			params.Seed = uint64(seed)
			if err := params.Validate(); err != nil {
				return err
			}
			if apiURL != "" {
				// The node runs its own draft model (strata node
				// --speculate draft:MODEL): a name here is not sent.
				source, _, err := parseSpeculateFlag(speculate, true)
				if err != nil {
					return err
				}
				return runRemote(cmd, apiURL, apiKey, api.GenerateRequest{
					Model: catalog.Name(modelPath), Prompt: prompt, MaxTokens: maxTokens, Temperature: params.Temperature,
					TopP: params.TopP, TopK: params.TopK, MinP: params.MinP, RepeatPenalty: params.RepeatPenalty, Seed: params.Seed, Stop: stops,
					Speculate: source,
				})
			}
			source, draftPath, err := parseSpeculateFlag(speculate, false)
			if err != nil {
				return err
			}
			kv, err := model.ParseKVType(kvType)
			if err != nil {
				return fmt.Errorf("--kv-type: %w", err)
			}
			loadStart := time.Now()
			device, layers, err := gf.parse()
			if err != nil {
				return err
			}
			e, err := engine.Open(modelPath, engine.Options{Threads: threads, Context: ctxLen, KVType: kv, Draft: draftPath, Speculate: source,
				GPU: device, GPULayers: layers})
			if err != nil {
				return err
			}
			if where := e.GPU(); where != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "gpu: %s\n", where)
			}
			defer e.Close()
			load := time.Since(loadStart)

			// Ctrl-C stops the generation; what was generated stays printed.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			out := bufio.NewWriter(cmd.OutOrStdout())
			res, err := e.Generate(ctx, engine.Request{Prompt: prompt, MaxTokens: maxTokens, Sampling: params, Stop: stops},
				func(t engine.Token) error {
					out.WriteString(t.Text)
					return out.Flush() // stream as tokens arrive
				})
			fmt.Fprintln(out)
			out.Flush()
			if err != nil && err != context.Canceled {
				return err
			}
			n := len(res.Tokens)
			spec := ""
			if source != "" && source != engine.SpeculateOff {
				// Paced: an answer where plain steps were faster guesses
				// little or nothing (engine's pace.go).
				spec = fmt.Sprintf(" | speculation %d of %d guesses right, %d steps", res.Accepted, res.Drafted, res.Stats.Steps)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "load %v | prompt %d tokens in %v (%.1f tok/s) | generated %d tokens in %v (%.1f tok/s)%s | finish %s | seed %d\n",
				load.Round(time.Millisecond), res.PromptTokens, res.PrefillDuration.Round(time.Microsecond), rate(res.PromptTokens, res.PrefillDuration),
				n, res.DecodeDuration.Round(time.Microsecond), rate(n, res.DecodeDuration), spec, finish(res.FinishReason, err), seed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", "", "path to a GGUF model (or, with --api, a model name)")
	f.StringVar(&apiURL, "api", "", "send the prompt to the node serving this URL (e.g. http://127.0.0.1:7340)")
	f.StringVar(&apiKey, "api-key", os.Getenv("STRATA_API_KEY"), "that node's API key (default $STRATA_API_KEY)")
	f.StringVar(&prompt, "prompt", "", "text to continue (empty: start from BOS)")
	f.IntVar(&maxTokens, "max-tokens", 256, "most tokens to generate (0: until end of text or a full context)")
	f.Float32Var(&params.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	f.Float32Var(&params.TopP, "top-p", 0, "nucleus sampling threshold (0: off)")
	f.IntVar(&params.TopK, "top-k", 0, "keep only the K most likely tokens (0: off)")
	f.Float32Var(&params.MinP, "min-p", 0, "drop tokens below this fraction of the top probability (0: off)")
	f.Float32Var(&params.RepeatPenalty, "repeat-penalty", 1, "penalty for repeating recent tokens (1: off)")
	f.Int64Var(&seed, "seed", -1, "sampling seed (-1: random)")
	f.StringArrayVar(&stops, "stop", nil, "stop before this string (repeatable)")
	f.IntVar(&threads, "threads", 0, "worker threads (0: all cores)")
	f.IntVar(&ctxLen, "ctx", 0, fmt.Sprintf("context length (0: the model's, at most %d)", model.DefaultContext))
	f.StringVar(&speculate, "speculate", "off", "guess tokens ahead: off, ngram, or draft:PATH (a draft model of the same vocabulary)")
	f.StringVar(&kvType, "kv-type", "f16", "KV cache type: "+model.KVTypes+" (local runs; a node's is set by strata node --kv-type)")
	gf.add(f)
	return cmd
}

// runRemote streams a generation from a node's /api/strata/generate.
func runRemote(cmd *cobra.Command, url, key string, req api.GenerateRequest) error {
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	out := bufio.NewWriter(cmd.OutOrStdout())
	start := time.Now()
	final, err := api.StreamGenerate(ctx, url, key, req, func(text string) error {
		out.WriteString(text)
		return out.Flush()
	})
	fmt.Fprintln(out)
	out.Flush()
	if err != nil && ctx.Err() == nil {
		return err
	}
	prefill := time.Duration(final.PrefillMS * float64(time.Millisecond))
	decode := time.Duration(final.DecodeMS * float64(time.Millisecond))
	spec := ""
	if final.Drafted > 0 {
		spec = fmt.Sprintf(" | speculation %d of %d guesses right", final.Accepted, final.Drafted)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "via %s | prompt %d tokens in %v (%.1f tok/s) | generated %d tokens in %v (%.1f tok/s)%s | finish %s | total %v\n",
		url, final.PromptTokens, prefill.Round(time.Microsecond), rate(final.PromptTokens, prefill), final.Tokens, decode.Round(time.Microsecond),
		rate(final.Tokens, decode), spec, finish(final.FinishReason, ctx.Err()), time.Since(start).Round(time.Millisecond))
	return nil
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func finish(reason string, err error) string {
	if err != nil {
		return "cancelled"
	}
	return reason
}

// parseSpeculateFlag splits --speculate into the engine's source and the
// draft model's path: off, ngram, draft:PATH. For a node (remote), draft
// alone names the node's own draft model, and a path given is not sent.
func parseSpeculateFlag(s string, remote bool) (source, draft string, err error) {
	if path, ok := strings.CutPrefix(s, engine.SpeculateDraft+":"); ok {
		if path == "" {
			return "", "", fmt.Errorf("--speculate draft:PATH: the draft model's path is missing")
		}
		if remote {
			path = ""
		}
		return engine.SpeculateDraft, path, nil
	}
	if s == engine.SpeculateDraft && !remote {
		return "", "", fmt.Errorf("--speculate draft needs the draft model: draft:PATH")
	}
	if err := engine.CheckSpeculate(s); err != nil {
		return "", "", fmt.Errorf("--speculate: %w", err)
	}
	return s, "", nil
}
