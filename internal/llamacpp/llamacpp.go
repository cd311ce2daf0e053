// Package llamacpp runs llama.cpp as an oracle for tests and benchmarks:
// the prebuilt CPU llama.cpp that the npm package node-llama-cpp ships,
// driven by the scripts in ../shared/bench (llamacpp-logits.mjs prints
// teacher-forced top-K logits for a token sequence on any GGUF).
//
// node-llama-cpp is installed by make deps (scripts/deps.sh) into .ci/npm/node_modules;
// STRATA_NODE_MODULES overrides that location. The scripts live beside
// the shared test data (../shared/bench); STRATA_BENCH overrides that.
// A missing oracle is an error, never a silent pass.
package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"strata/internal/testdata"
)

// Pair is one (token id, logit) entry of a position's top-K list.
type Pair struct {
	ID    int
	Logit float32
}

// MarshalJSON writes the pair as [id, logit], the oracle's shape.
func (p Pair) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]float64{float64(p.ID), float64(p.Logit)})
}

// UnmarshalJSON reads [id, logit].
func (p *Pair) UnmarshalJSON(b []byte) error {
	var v [2]float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p.ID, p.Logit = int(v[0]), float32(v[1])
	return nil
}

// Position is the next-token prediction after one input position.
type Position struct {
	Argmax int    `json:"argmax"`
	Top    []Pair `json:"top"` // highest logit first
}

// Logits is the teacher-forced prediction at every input position: the
// JSON shape of llamacpp-logits.mjs and of `strata logits --json`.
type Logits struct {
	Positions []Position `json:"positions"`
}

// TopOf builds a Position from a full row of logits, keeping the k largest.
func TopOf(logits []float32, k int) Position {
	k = min(k, len(logits))
	top := make([]Pair, 0, k+1)
	for id, v := range logits {
		if len(top) == k && v <= top[k-1].Logit {
			continue
		}
		i := len(top)
		if i < k {
			top = append(top, Pair{})
		} else {
			i = k - 1
		}
		for i > 0 && top[i-1].Logit < v {
			top[i] = top[i-1]
			i--
		}
		top[i] = Pair{id, v}
	}
	p := Position{Top: top}
	if len(top) > 0 {
		p.Argmax = top[0].ID
	}
	return p
}

// NodeModules returns the node_modules directory that holds node-llama-cpp.
func NodeModules() (string, error) {
	dir := os.Getenv("STRATA_NODE_MODULES")
	if dir == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "", errors.New("llamacpp: cannot locate the source tree; set STRATA_NODE_MODULES")
		}
		repo := filepath.Dir(filepath.Dir(filepath.Dir(file))) // REPO/internal/llamacpp/llamacpp.go
		dir = filepath.Join(repo, ".ci", "npm", "node_modules")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node-llama-cpp", "package.json")); err != nil {
		return "", fmt.Errorf("llamacpp: node-llama-cpp is not installed in %s (run make deps, or npm install --prefix .ci/npm node-llama-cpp@3.22.1; STRATA_NODE_MODULES overrides the place)", dir)
	}
	return dir, nil
}

// Script returns the path of one of the shared bench scripts, e.g.
// "llamacpp-logits.mjs".
func Script(name string) (string, error) {
	dir := os.Getenv("STRATA_BENCH")
	if dir == "" {
		td, err := testdata.Dir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(td), "bench")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("llamacpp: script %s not found (STRATA_BENCH overrides its folder): %w", name, err)
	}
	return p, nil
}

// Options tune a logits run. The zero value keeps llama.cpp's KV cache
// in F32 without flash attention (the least rounding).
type Options struct {
	KVType    string // F32 (default), F16 or Q8_0
	FlashAttn bool
}

// RunLogits returns llama.cpp's teacher-forced top-k logits after every
// position of ids on the model at path.
func RunLogits(ctx context.Context, path string, ids []int, k int, o Options) (*Logits, error) {
	mods, err := NodeModules()
	if err != nil {
		return nil, err
	}
	script, err := Script("llamacpp-logits.mjs")
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	if mods, err = withoutAMX(mods); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", script, path, strings.Join(parts, " "), strconv.Itoa(k))
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "NODE_PRESERVE_SYMLINKS=1")
	if o.KVType != "" {
		cmd.Env = append(cmd.Env, "LLAMACPP_KV_TYPE="+o.KVType)
	}
	if o.FlashAttn {
		cmd.Env = append(cmd.Env, "LLAMACPP_FLASH_ATTN=1")
	}
	// The script ends with process.exit, which drops whatever of a long
	// answer is still queued for a pipe; Node writes to a file
	// synchronously, so its answer goes to one.
	out, err := os.CreateTemp("", "llamacpp-logits-*.json")
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("llamacpp: %s on %s: %v\n%s", filepath.Base(script), path, err, lastLines(stderr.String(), 20))
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	stdout := bytes.NewBuffer(b)
	var l Logits
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &l); err != nil {
		return nil, fmt.Errorf("llamacpp: reading the script's output: %v\n%s", err, lastLines(stdout.String(), 5))
	}
	if len(l.Positions) != len(ids) {
		return nil, fmt.Errorf("llamacpp: %d positions returned for %d ids", len(l.Positions), len(ids))
	}
	return &l, nil
}

// Diff is how far one Logits is from a reference.
type Diff struct {
	Positions      int
	ArgmaxMismatch []int   // positions whose argmax differs
	MaxRel         float64 // max |a-b| over the reference's top-k ids, relative to the largest |logit| of that position
	MaxRelPos      int
	Missing        int // reference top-k ids absent from the other's top-k (compared only when present)
}

func (d Diff) String() string {
	return fmt.Sprintf("%d positions, argmax mismatches at %v, max relative difference %.3g (position %d), %d top ids not in both lists",
		d.Positions, d.ArgmaxMismatch, d.MaxRel, d.MaxRelPos, d.Missing)
}

// Compare measures got against ref over ref's top-k lists. A logit is
// compared only when got lists the same id; ids in one top-k but not the
// other are counted in Missing (ties near the cut-off make that normal).
func Compare(got, ref *Logits) Diff {
	d := Diff{Positions: min(len(got.Positions), len(ref.Positions))}
	for i := 0; i < d.Positions; i++ {
		g, r := got.Positions[i], ref.Positions[i]
		if g.Argmax != r.Argmax {
			d.ArgmaxMismatch = append(d.ArgmaxMismatch, i)
		}
		scale := 0.0
		for _, p := range r.Top {
			scale = math.Max(scale, math.Abs(float64(p.Logit)))
		}
		if scale == 0 {
			scale = 1
		}
		for _, p := range r.Top {
			found := false
			for _, q := range g.Top {
				if q.ID == p.ID {
					found = true
					if rel := math.Abs(float64(q.Logit-p.Logit)) / scale; rel > d.MaxRel {
						d.MaxRel, d.MaxRelPos = rel, i
					}
				}
			}
			if !found {
				d.Missing++
			}
		}
	}
	return d
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
