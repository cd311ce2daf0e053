// Package modelinfo is what a node knows of a model from its GGUF file,
// read once: its configuration, the bytes of each layer, its tokenizer,
// how its layers split across a tensor-parallel group, and the token
// vocabulary constrained sampling walks. A node keeps one Info per model
// file (stage.Host.Info) and hands the same one to its API, its
// sessions' planning and its stages, so they never disagree on a token.
// The package example reads one.
package modelinfo

import (
	"math"
	"sync"

	"strata/runtime/gguf"
	"strata/runtime/grammar"
	"strata/runtime/model"
	"strata/runtime/tensor"
	"strata/runtime/tokenizer"
)

// Info is a model's description. It copies what it needs: the file may
// be closed after Read. Safe for concurrent use.
type Info struct {
	Arch      string
	Config    model.Config
	Profile   model.Profile
	Tokenizer *tokenizer.Tokenizer
	// NoTP says why the layers cannot split across a tensor-parallel
	// group ("" = they can).
	NoTP string
	// ExpertUnits is how many tensor-parallel units each routed expert's
	// columns split into (0: a dense model, or no TP).
	ExpertUnits int
	// SizeBytes is the bytes of every tensor's data.
	SizeBytes uint64
	// InvariantRows is the most rows a batch of the model may hold with
	// each row computed as alone (model.Model.InvariantRows, from the
	// tensor types, without loading them).
	InvariantRows int
	// InvariantRowsAnywhere is InvariantRows on every architecture
	// (tensor.InvariantVectorsAnywhere): the bound for a batch that
	// stages on other machines compute.
	InvariantRowsAnywhere int

	vocabOnce sync.Once
	vocab     *grammar.Vocab
}

// Read describes the model in f.
func Read(f *gguf.File) (*Info, error) {
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	prof, err := model.ProfileOf(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		return nil, err
	}
	in := &Info{Arch: f.Metadata().Architecture(), Config: cfg, Profile: prof, Tokenizer: tok}
	if u, err := model.TPUnitsOf(f, cfg, 0, cfg.Layers); err != nil {
		in.NoTP = err.Error()
	} else if cfg.Experts > 0 {
		in.ExpertUnits = cfg.ExpertFFN / u.FFN
	}
	in.InvariantRows, in.InvariantRowsAnywhere = math.MaxInt, math.MaxInt
	hasOutput := false
	for _, t := range f.Tensors() {
		in.SizeBytes += uint64(len(f.Data(t)))
		hasOutput = hasOutput || t.Name == "output.weight"
	}
	for _, t := range f.Tensors() {
		// Matrices; the embedding only where it is the output head too.
		if len(t.Dims) >= 2 && (t.Name != "token_embd.weight" || !hasOutput) {
			in.InvariantRows = min(in.InvariantRows, tensor.InvariantVectors(t.Type))
			in.InvariantRowsAnywhere = min(in.InvariantRowsAnywhere, tensor.InvariantVectorsAnywhere(t.Type))
		}
	}
	return in, nil
}

// Vocab is the tokenizer's vocabulary as the grammar matcher walks it,
// built on first use (a trie of every token's bytes).
func (in *Info) Vocab() *grammar.Vocab {
	in.vocabOnce.Do(func() { in.vocab = grammar.VocabOf(in.Tokenizer) })
	return in.vocab
}
