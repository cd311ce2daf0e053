package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"strata/runtime/gguf"
	"strata/runtime/model"
)

func inspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a GGUF model's architecture, tokenizer, tensors and bytes per layer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			r, err := inspect(f)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printInspect(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// inspectReport is the JSON shape of `strata inspect --json`.
type inspectReport struct {
	Files        []string         `json:"files"`
	Version      uint32           `json:"gguf_version"`
	Architecture string           `json:"architecture"`
	Name         string           `json:"name,omitempty"`
	Hyper        map[string]any   `json:"hyperparameters"`
	Tokenizer    tokenizerSummary `json:"tokenizer"`
	Tensors      []tensorRow      `json:"tensors"`
	Layers       []uint64         `json:"layer_bytes"`
	EmbedBytes   uint64           `json:"embedding_bytes"`
	HeadBytes    uint64           `json:"head_bytes"`
	OtherBytes   uint64           `json:"other_bytes"`
	TotalBytes   uint64           `json:"total_bytes"`
	KVPerToken   uint64           `json:"kv_bytes_per_token"`
	TiedOutput   bool             `json:"tied_output"`
	TypeCounts   map[string]int   `json:"tensor_types"`
}

type tokenizerSummary struct {
	Model        string `json:"model"`
	Pre          string `json:"pre,omitempty"`
	VocabSize    int    `json:"vocab_size"`
	Merges       int    `json:"merges"`
	BOS          *int64 `json:"bos,omitempty"`
	EOS          *int64 `json:"eos,omitempty"`
	ChatTemplate bool   `json:"chat_template"`
}

type tensorRow struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Shape []uint64 `json:"shape"`
	Bytes uint64   `json:"bytes"`
}

// hyperKeys are the architecture-prefixed keys inspect reports when present.
var hyperKeys = []string{
	"context_length", "embedding_length", "block_count", "feed_forward_length",
	"attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
	"attention.layer_norm_rms_epsilon", "rope.dimension_count", "rope.freq_base", "rope.scaling.type",
	"rope.scaling.factor", "expert_count", "expert_used_count", "expert_feed_forward_length", "vocab_size",
}

func inspect(f *gguf.File) (*inspectReport, error) {
	md := f.Metadata()
	r := &inspectReport{
		Files:        f.Paths(),
		Version:      f.Version(),
		Architecture: md.Architecture(),
		Hyper:        map[string]any{},
		TypeCounts:   map[string]int{},
	}
	r.Name, _ = md.String("general.name")
	for _, k := range hyperKeys {
		if v, ok := md.Get(md.ArchKey(k)); ok {
			r.Hyper[k] = v
		}
	}
	tok := &r.Tokenizer
	tok.Model, _ = md.String("tokenizer.ggml.model")
	tok.Pre, _ = md.String("tokenizer.ggml.pre")
	toks, _ := md.Strings("tokenizer.ggml.tokens")
	merges, _ := md.Strings("tokenizer.ggml.merges")
	tok.VocabSize, tok.Merges = len(toks), len(merges)
	if v, ok := md.Int("tokenizer.ggml.bos_token_id"); ok {
		tok.BOS = &v
	}
	if v, ok := md.Int("tokenizer.ggml.eos_token_id"); ok {
		tok.EOS = &v
	}
	_, tok.ChatTemplate = md.String("tokenizer.chat_template")
	for _, t := range f.Tensors() {
		r.Tensors = append(r.Tensors, tensorRow{t.Name, t.Type.String(), t.Dims, t.Size})
		r.TypeCounts[t.Type.String()]++
	}
	if len(f.Tensors()) > 0 {
		p, err := model.ProfileOf(f)
		if err != nil {
			return nil, err
		}
		r.Layers, r.EmbedBytes, r.HeadBytes, r.OtherBytes = p.LayerBytes, p.EmbedBytes, p.HeadBytes, p.OtherBytes
		r.TotalBytes, r.KVPerToken, r.TiedOutput = p.TotalBytes(), p.KVBytesPerToken, p.TiedOutput
	}
	return r, nil
}

func printInspect(w io.Writer, r *inspectReport) {
	fmt.Fprintf(w, "file:          %s (GGUF v%d)\n", strings.Join(r.Files, ", "), r.Version)
	fmt.Fprintf(w, "architecture:  %s", r.Architecture)
	if r.Name != "" {
		fmt.Fprintf(w, " (%s)", r.Name)
	}
	fmt.Fprintln(w)
	for _, k := range hyperKeys {
		if v, ok := r.Hyper[k]; ok {
			fmt.Fprintf(w, "  %-34s %v\n", k, v)
		}
	}
	t := r.Tokenizer
	fmt.Fprintf(w, "tokenizer:     %s", t.Model)
	if t.Pre != "" {
		fmt.Fprintf(w, " (pre %s)", t.Pre)
	}
	fmt.Fprintf(w, ", %d tokens", t.VocabSize)
	if t.Merges > 0 {
		fmt.Fprintf(w, ", %d merges", t.Merges)
	}
	if t.BOS != nil {
		fmt.Fprintf(w, ", BOS %d", *t.BOS)
	}
	if t.EOS != nil {
		fmt.Fprintf(w, ", EOS %d", *t.EOS)
	}
	if t.ChatTemplate {
		fmt.Fprint(w, ", chat template present")
	} else {
		fmt.Fprint(w, ", no chat template")
	}
	fmt.Fprintln(w)
	if len(r.Tensors) == 0 {
		fmt.Fprintln(w, "tensors:       none (vocabulary-only file)")
		return
	}
	fmt.Fprintf(w, "tensors:       %d, %s in all\n", len(r.Tensors), humanBytes(r.TotalBytes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  name\ttype\tshape\tbytes\t")
	for _, row := range r.Tensors {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\t\n", row.Name, row.Type, row.Shape, row.Bytes)
	}
	tw.Flush()
	fmt.Fprintln(w, "bytes per layer (what placement uses):")
	fmt.Fprintf(w, "  embedding        %s\n", humanBytes(r.EmbedBytes))
	for i, b := range r.Layers {
		fmt.Fprintf(w, "  layer %-10d %s\n", i, humanBytes(b))
	}
	tied := ""
	if r.TiedOutput {
		tied = " (output tied to the embedding)"
	}
	fmt.Fprintf(w, "  head             %s%s\n", humanBytes(r.HeadBytes), tied)
	if r.OtherBytes > 0 {
		fmt.Fprintf(w, "  other            %s\n", humanBytes(r.OtherBytes))
	}
	fmt.Fprintf(w, "  KV cache (f32)   %s per token\n", humanBytes(r.KVPerToken))
}

// humanBytes prints n in binary units with the exact count for small values.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
