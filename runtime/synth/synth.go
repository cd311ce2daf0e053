// Package synth writes random-weight GGUF models of real shapes (see
// model.Shapes), for benchmarks and placement tests. The files carry a
// small synthetic SentencePiece vocabulary of the shape's size, so they
// load anywhere a GGUF loads; their text output is meaningless.
//
// The package example writes one and opens it.
package synth

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// Options tunes WriteFile. Zero values pick the defaults noted.
type Options struct {
	Type tensor.Type // weight matrix type; F32 by default (zero value)
	Seed uint64      // random seed; same seed, same bytes
	// Sparse leaves every tensor's data as zeros written as holes: the file
	// has the real size and tensor table but takes almost no disk. For
	// placement and loader tests of models too large to fill.
	Sparse bool
	// Layers, when > 0, overrides the shape's layer count (small test models).
	Layers int
	// MaxBytes refuses non-sparse files larger than this; 0 = 64 GB.
	MaxBytes uint64
}

// Size returns the bytes of tensor data a shape takes in type t.
func Size(s model.Shape, t tensor.Type) uint64 {
	var n uint64
	for _, ts := range s.Tensors(t) {
		n += ts.Bytes()
	}
	return n
}

// WriteFile writes the model to path (atomically: a temporary file renamed
// into place, so an interrupted run leaves no half file).
func WriteFile(path string, s model.Shape, o Options) error {
	if o.Layers > 0 {
		s.Layers = o.Layers
	}
	if !tensor.Supported(o.Type) {
		return fmt.Errorf("synth: type %s cannot be written (supported: F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)", o.Type)
	}
	size := Size(s, o.Type)
	limit := o.MaxBytes
	if limit == 0 {
		limit = 64e9
	}
	if !o.Sparse {
		if size > limit {
			return fmt.Errorf("synth: %s in %s is %.1f GB, over the %.0f GB limit for filled files; use --sparse (zero weights written as holes, no disk used) for placement tests",
				s.Name, o.Type, float64(size)/1e9, float64(limit)/1e9)
		}
		if free, err := freeBytes(filepath.Dir(path)); err == nil && size > free {
			return fmt.Errorf("synth: %s in %s needs %.1f GB; %s has %.1f GB free", s.Name, o.Type, float64(size)/1e9, filepath.Dir(path), float64(free)/1e9)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".synth-*.gguf")
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, s, o); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Write encodes the model to w (an *os.File gets holes when o.Sparse).
func Write(w io.Writer, s model.Shape, o Options) error {
	if o.Layers > 0 {
		s.Layers = o.Layers
	}
	md, err := Metadata(s, o.Type)
	if err != nil {
		return err
	}
	var tensors []gguf.WriteTensor
	for _, ts := range s.Tensors(o.Type) {
		wt := gguf.WriteTensor{Name: ts.Name, Type: ts.Type, Dims: ts.Dims}
		if !o.Sparse {
			wt.WriteData = randomData(ts, s, o.Seed)
		}
		tensors = append(tensors, wt)
	}
	if err := gguf.Write(w, md, tensors); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// randomData streams a tensor's random values, quantized row by row.
// Norm weights are 1 (as trained models' are, roughly); matrices are
// uniform with variance 1/cols so activations keep their scale layer
// after layer.
//
// Shapes marked Peaked (test models) differ so that they test more and
// their argmax is robust: norm weights are uniform in [0.5, 1.5] and
// biases in [-0.5, 0.5] (not 1, which would hide a missing or misplaced
// weight), and the input token's identity reaches the output head along
// a channel of the residual that the layers barely write to (see
// peakEmbd): the top logit then stands clear of the second by a
// twentieth of its size or more, where with random rows over 1000 tokens
// the top two are, somewhere in a hundred positions, within float
// rounding (or 8-bit rounding) of each other. The layers still make all
// the other logits, and the top one's size; what they no longer decide
// is which token is on top.
func randomData(ts model.TensorSpec, s model.Shape, seed uint64) func(io.Writer) error {
	return func(w io.Writer) error {
		h := fnv.New64a()
		h.Write([]byte(ts.Name))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		cols := int(ts.Dims[0])
		rows := 1
		for _, d := range ts.Dims[1:] {
			rows *= int(d)
		}
		isNorm := len(ts.Dims) == 1
		isBias := strings.HasSuffix(ts.Name, ".bias")
		// The router's selection bias (exp_probs_b) of 1s would not change
		// any choice; give it values of the size trained ones have.
		isSelectionBias := strings.HasSuffix(ts.Name, "exp_probs_b.bias")
		bound := float32(math.Sqrt(3 / float64(cols)))
		var head []float32
		if s.Peaked && ts.Name == "output.weight" {
			head = peakedHead(s, seed, rows, cols)
		}
		// A Peaked shape's token channel (see peakedHead): the embedding is
		// large in the residual's first Embd/4 dims, and what the layers
		// write to the residual is small there.
		var chanScale float32
		switch {
		case !s.Peaked:
		case ts.Name == "token_embd.weight":
			chanScale = peakEmbd
		case strings.HasSuffix(ts.Name, "attn_output.weight"), strings.HasSuffix(ts.Name, "ffn_down.weight"),
			strings.HasSuffix(ts.Name, "ffn_down_exps.weight"), strings.HasSuffix(ts.Name, "ffn_down_shexp.weight"):
			chanScale = peakLeak
		}
		isEmbd := ts.Name == "token_embd.weight"
		if ts.Name == "rope_freqs.weight" {
			return writeRows(w, ts, llama3RopeFactors(s, cols))
		}
		rowBytes, _ := ts.Type.RowBytes(int64(cols))
		// Rows per chunk: about 1M values.
		chunk := max(1, (1<<20)/cols)
		vals := make([]float32, chunk*cols)
		buf := make([]byte, chunk*int(rowBytes))
		for r0 := 0; r0 < rows; r0 += chunk {
			n := min(chunk, rows-r0)
			v := vals[:n*cols]
			for i := range v {
				switch {
				case isBias && (s.Peaked || isSelectionBias):
					v[i] = r.Float32() - 0.5
				case isNorm && s.Peaked:
					v[i] = 0.5 + r.Float32()
				case isNorm:
					v[i] = 1
				default:
					v[i] = (r.Float32()*2 - 1) * bound
				}
				// The embedding's columns are residual dims; the writers'
				// rows are (per expert, for a 3-D tensor).
				if chanScale != 0 && (isEmbd && i%cols < s.Embd/4 || !isEmbd && (r0+i/cols)%s.Embd < s.Embd/4) {
					v[i] *= chanScale
				}
				if head != nil {
					v[i] = head[r0*cols+i]
				}
			}
			b := buf[:n*int(rowBytes)]
			if err := tensor.QuantizeInto(ts.Type, v, b); err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
}

// A Peaked shape carries each input token's identity from the embedding
// to the output head in a channel, the residual's first Embd/4 dims: the
// embedding is peakEmbd times larger there than elsewhere, the layers'
// writes to the residual (attention output, FFN and expert down
// projections) peakLeak times smaller, and row v of the output head is
// peakScale * (r_v + peakAlign * c_next(v)), with r_v a random row like
// any other matrix's and c_t the unit vector along token t's embedding in
// the channel (next is a random permutation of the vocabulary). So the
// argmax after token t is next's inverse of t by a wide margin, and
// every other logit, and the top one's size, is the layers' doing.
// Measured on the tiny shapes (F32, 64 random ids and the 64-token greedy
// continuation, seed 1): the smallest top-1 margin over 128 positions is
// 0.045 of the top logit for deepseek2-tiny and 0.26 to 0.29 for the
// others, where it was 0.003 to 0.007 with Zipf-scaled random rows;
// taking out every layer moves the top-5 logits by 3 to 8 times the top
// logit.
const (
	peakEmbd  = 8
	peakLeak  = 0.02
	peakScale = 4
	peakAlign = 8
)

// peakedHead is a Peaked shape's output.weight, rows x cols values (see
// peakEmbd). It draws the embedding's values as randomData does; their
// channel's direction is all it takes from them.
func peakedHead(s model.Shape, seed uint64, rows, cols int) []float32 {
	hash := func(name string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(name))
		return h.Sum64()
	}
	bound := float32(math.Sqrt(3 / float64(cols)))
	re := rand.New(rand.NewPCG(seed, hash("token_embd.weight")))
	emb := make([]float32, s.Vocab*cols)
	for i := range emb {
		emb[i] = (re.Float32()*2 - 1) * bound
	}
	r := rand.New(rand.NewPCG(seed, hash("output.weight")))
	next := rand.New(rand.NewPCG(seed, hash("output.weight")+1)).Perm(s.Vocab)
	head := make([]float32, rows*cols)
	for v := range rows {
		e := emb[next[v]*cols : next[v]*cols+s.Embd/4]
		var n float64
		for _, x := range e {
			n += float64(x) * float64(x)
		}
		k := peakAlign / float32(math.Sqrt(n))
		for j := range cols {
			x := (r.Float32()*2 - 1) * bound
			if j < len(e) {
				x += k * e[j]
			}
			head[v*cols+j] = x * peakScale
		}
	}
	return head
}

// writeRows writes v (a whole tensor) in the tensor's type.
func writeRows(w io.Writer, ts model.TensorSpec, v []float32) error {
	b, err := tensor.Quantize(ts.Type, v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// llama3RopeFactors are Llama 3.1's rope_freqs for a head of 2n
// dimensions, as its GGUF converter computes them (rope_scaling factor 8,
// low_freq_factor 1, high_freq_factor 4, original context 8192): pairs
// whose wavelength is under 8192/4 positions keep their frequency, those
// over 8192 turn 8 times slower, and those between are interpolated.
func llama3RopeFactors(s model.Shape, n int) []float32 {
	const factor, lowFreq, highFreq, origCtx = 8.0, 1.0, 4.0, 8192.0
	f := make([]float32, n)
	for i := range f {
		freq := math.Pow(float64(s.RopeBase), -float64(2*i)/float64(2*n))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < origCtx/highFreq:
			f[i] = 1
		case wavelen > origCtx/lowFreq:
			f[i] = factor
		default:
			smooth := (origCtx/wavelen - lowFreq) / (highFreq - lowFreq)
			f[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return f
}

// Metadata returns the GGUF metadata of a shape: hyper-parameters under
// the architecture prefix, and a synthetic SentencePiece vocabulary.
func Metadata(s model.Shape, t tensor.Type) (*gguf.Metadata, error) {
	if s.Vocab < 300 {
		return nil, errors.New("synth: vocabularies need at least 300 tokens")
	}
	md := gguf.NewMetadata()
	set := func(k string, v any) { md.Set(k, v) }
	a := s.Arch
	set("general.architecture", a)
	set("general.name", fmt.Sprintf("synthetic %s %s", s.Name, t))
	set("general.file_type", uint32(fileType(t)))
	set(a+".context_length", uint32(s.Context))
	set(a+".embedding_length", uint32(s.Embd))
	set(a+".block_count", uint32(s.Layers))
	if s.FFN > 0 {
		set(a+".feed_forward_length", uint32(s.FFN))
	}
	set(a+".attention.head_count", uint32(s.Heads))
	set(a+".attention.head_count_kv", uint32(s.KVHeads))
	set(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
	set(a+".rope.freq_base", s.RopeBase)
	hd := s.HeadDim
	if hd == 0 {
		hd = s.Embd / s.Heads
	}
	if s.HeadDim > 0 {
		set(a+".attention.key_length", uint32(hd))
		set(a+".attention.value_length", uint32(hd))
	}
	set(a+".rope.dimension_count", uint32(hd))
	if s.Experts > 0 {
		set(a+".expert_count", uint32(s.Experts))
		set(a+".expert_used_count", uint32(s.ExpertsUsed))
		set(a+".expert_feed_forward_length", uint32(s.ExpertFFN))
	}
	if s.Arch == "deepseek2" {
		deepseek2Metadata(md, s)
	}
	tokens, scores, types := vocabulary(s.Vocab)
	set("tokenizer.ggml.model", "llama")
	set("tokenizer.ggml.tokens", gguf.Array{Type: gguf.TypeString, Values: tokens})
	set("tokenizer.ggml.scores", gguf.Array{Type: gguf.TypeFloat32, Values: scores})
	set("tokenizer.ggml.token_type", gguf.Array{Type: gguf.TypeInt32, Values: types})
	set("tokenizer.ggml.bos_token_id", uint32(1))
	set("tokenizer.ggml.eos_token_id", uint32(2))
	set("tokenizer.ggml.unknown_token_id", uint32(0))
	set("tokenizer.ggml.add_bos_token", true)
	set("tokenizer.ggml.add_eos_token", false)
	set("general.quantization_version", uint32(2))
	return md, nil
}

// deepseek2Metadata sets the multi-head latent attention, routing and
// YaRN keys as llama.cpp's converter writes them for DeepSeek-V2/V3.
func deepseek2Metadata(md *gguf.Metadata, s model.Shape) {
	a := s.Arch
	set := func(k string, v any) { md.Set(a+"."+k, v) }
	set("leading_dense_block_count", uint32(s.DenseLayers))
	// llama.cpp requires these two even when no layer is MoE.
	set("expert_shared_count", uint32(s.SharedExperts))
	set("expert_feed_forward_length", uint32(s.ExpertFFN))
	if s.Experts > 0 {
		if s.ExpertWeightsScale != 0 {
			set("expert_weights_scale", s.ExpertWeightsScale)
		}
		set("expert_weights_norm", s.ExpertWeightsNorm)
		gating := uint32(1) // softmax
		if s.SigmoidGating {
			gating = 2
		}
		set("expert_gating_func", gating)
		if s.ExpertGroups > 0 {
			set("expert_group_count", uint32(s.ExpertGroups))
			set("expert_group_used_count", uint32(s.ExpertGroupsUsed))
		}
	}
	if s.QLoraRank > 0 {
		set("attention.q_lora_rank", uint32(s.QLoraRank))
	}
	set("attention.kv_lora_rank", uint32(s.KVLoraRank))
	set("rope.dimension_count", uint32(s.RopeHeadDim))
	if s.LegacyKVB {
		set("attention.key_length", uint32(s.NopeHeadDim+s.RopeHeadDim))
		set("attention.value_length", uint32(s.VHeadDim))
	} else {
		// The MQA form of current converters: one KV head whose key is the
		// latent and the rope key, and whose value is the latent.
		set("attention.head_count_kv", uint32(1))
		set("attention.key_length", uint32(s.KVLoraRank+s.RopeHeadDim))
		set("attention.value_length", uint32(s.KVLoraRank))
		set("attention.key_length_mla", uint32(s.NopeHeadDim+s.RopeHeadDim))
		set("attention.value_length_mla", uint32(s.VHeadDim))
	}
	if s.RopeScaling > 0 {
		set("rope.scaling.type", "yarn")
		set("rope.scaling.factor", s.RopeScaling)
		set("rope.scaling.original_context_length", uint32(s.RopeOrigCtx))
		if s.YarnMscaleAll != 0 {
			set("rope.scaling.yarn_log_multiplier", 0.1*s.YarnMscaleAll)
		}
	}
}

// fileType is llama.cpp's general.file_type for "mostly T".
func fileType(t tensor.Type) int {
	switch t {
	case tensor.F32:
		return 0
	case tensor.F16:
		return 1
	case tensor.Q4_0:
		return 2
	case tensor.Q8_0:
		return 7
	case tensor.Q2_K:
		return 10
	case tensor.Q3_K:
		return 11 // Q3_K_S
	case tensor.Q4_K:
		return 15 // Q4_K_M
	case tensor.Q5_K:
		return 17 // Q5_K_M
	case tensor.Q6_K:
		return 18
	case tensor.IQ4_XS:
		return 30
	case tensor.BF16:
		return 32
	}
	return 0
}

// vocabulary builds an n-token SentencePiece vocabulary: <unk>, <s>, </s>,
// the 256 byte tokens, then printable pieces (single characters, with and
// without the ▁ word marker, then letter pairs and triples, then filler).
func vocabulary(n int) ([]string, []float32, []int32) {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	seen := map[string]bool{}
	add := func(p string) {
		if len(tokens) < n && !seen[p] {
			seen[p] = true
			tokens = append(tokens, p)
			types = append(types, 1)
		}
	}
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for c := byte(' ') + 1; c < 127; c++ {
		add("▁" + string(c))
		add(string(c))
	}
	add("▁")
	for _, x := range letters {
		for _, y := range letters {
			add("▁" + string(x) + string(y))
			add(string(x) + string(y))
		}
	}
	for _, x := range letters {
		for _, y := range letters {
			for _, z := range letters {
				add(string(x) + string(y) + string(z))
			}
		}
	}
	for i := 0; len(tokens) < n; i++ {
		add(fmt.Sprintf("▁tok%d", i))
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens, scores, types
}
