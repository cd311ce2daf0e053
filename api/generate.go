package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"strata/runtime/engine"
	"strata/runtime/sample"
)

// Generator runs a generation somewhere in the cluster (origin.Origin).
type Generator interface {
	Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error)
}

// GenerateRequest is the body of POST /api/strata/generate.
type GenerateRequest struct {
	Model         string   `json:"model"`
	Prompt        string   `json:"prompt"`
	MaxTokens     int      `json:"max_tokens"`
	Temperature   float32  `json:"temperature"`
	TopP          float32  `json:"top_p"`
	TopK          int      `json:"top_k"`
	MinP          float32  `json:"min_p"`
	RepeatPenalty float32  `json:"repeat_penalty"`
	Seed          uint64   `json:"seed"`
	Stop          []string `json:"stop"`
	// Speculate: off, ngram or draft (the node's draft model); "" = the
	// node's default (strata node --speculate).
	Speculate string `json:"speculate,omitempty"`
}

// GenerateEvent is one line of the NDJSON stream POST /api/strata/generate
// answers with: text events as tokens arrive, then one final event with
// Done set (or Error).
type GenerateEvent struct {
	Text         string  `json:"text,omitempty"`
	Token        *int    `json:"token,omitempty"`
	Done         bool    `json:"done,omitempty"`
	Error        string  `json:"error,omitempty"`
	FinishReason string  `json:"finish_reason,omitempty"`
	PromptTokens int     `json:"prompt_tokens,omitempty"`
	Tokens       int     `json:"tokens,omitempty"`
	PrefillMS    float64 `json:"prefill_ms,omitempty"`
	DecodeMS     float64 `json:"decode_ms,omitempty"`
	// Speculative decoding: guesses checked, and those accepted.
	Drafted  int `json:"drafted,omitempty"`
	Accepted int `json:"accepted,omitempty"`
}

// maxRequestBytes bounds a request body.
const maxRequestBytes = 4 << 20

// GenerateHandler serves POST /api/strata/generate: strata's minimal
// streaming endpoint (token ids and timings per generation; `strata run
// --api` uses it). /api/generate is Ollama's (ollama.go). A client that
// disconnects cancels its generation.
func GenerateHandler(g Generator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var req GenerateRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "invalid JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.Model == "" {
			http.Error(w, "model is required", http.StatusBadRequest)
			return
		}
		params := sample.Params{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, MinP: req.MinP, RepeatPenalty: req.RepeatPenalty, Seed: req.Seed}
		if err := params.Validate(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := engine.CheckSpeculate(req.Speculate); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		flusher, _ := w.(http.Flusher)
		send := func(ev GenerateEvent) error {
			if err := enc.Encode(ev); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		}
		res, err := g.Generate(r.Context(), engine.Request{Model: req.Model, Prompt: req.Prompt, MaxTokens: req.MaxTokens, Sampling: params, Stop: req.Stop, Speculate: req.Speculate},
			func(t engine.Token) error {
				id := t.ID
				return holdFlushes(w, t.More, func() error { return send(GenerateEvent{Text: t.Text, Token: &id}) })
			})
		final := GenerateEvent{Done: true, FinishReason: res.FinishReason, PromptTokens: res.PromptTokens, Tokens: len(res.Tokens),
			PrefillMS: float64(res.PrefillDuration.Microseconds()) / 1000, DecodeMS: float64(res.DecodeDuration.Microseconds()) / 1000,
			Drafted: res.Drafted, Accepted: res.Accepted}
		if err != nil {
			final.Error = err.Error()
		}
		send(final)
	})
}

// StreamGenerate posts req to a node's /api/strata/generate (with key as the
// bearer token when set) and calls onText for each piece of text as it
// arrives; it returns the final event.
func StreamGenerate(ctx context.Context, baseURL, key string, req GenerateRequest, onText func(string) error) (GenerateEvent, error) {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+"/api/strata/generate", strings.NewReader(string(body)))
	if err != nil {
		return GenerateEvent{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return GenerateEvent{}, fmt.Errorf("cannot reach the node at %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return GenerateEvent{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev GenerateEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return GenerateEvent{}, errors.New("the node closed the stream before the end of the generation")
			}
			return GenerateEvent{}, err
		}
		if ev.Done {
			if ev.Error != "" {
				return ev, errors.New(ev.Error)
			}
			return ev, nil
		}
		if err := onText(ev.Text); err != nil {
			return ev, err
		}
	}
}
