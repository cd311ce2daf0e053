package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strata/runtime/catalog"
	"strata/runtime/tokenizer"
)

// What every dialect (OpenAI, Anthropic, Ollama) does with a request:
// read its JSON, find its model and check that the prompt fits, parse the
// fields they share, and answer or fail (counted in the metrics).

// readJSON decodes a bounded request body into v.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) *Error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return badRequest("", "", "cannot read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "invalid_json", "The request body is empty; it must be a JSON object.")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "invalid_type", "Invalid type for %q: expected %s, got a JSON %s.", te.Field, te.Type, te.Value)
		}
		return badRequest("", "invalid_json", "The request body is not valid JSON: %v", err)
	}
	return nil
}

func (s *Server) writeJSON(w http.ResponseWriter, endpoint string, v any) {
	writeAnswer(w, v)
	s.metrics.request(endpoint, http.StatusOK)
}

func (s *Server) fail(w http.ResponseWriter, endpoint string, e *Error) {
	writeErrorShape(w, shapeOf(endpoint), e)
	s.metrics.request(endpoint, e.Status)
}

// lookup resolves a model name into its description and tokenizer.
func (s *Server) lookup(name string) (ModelInfo, *tokenizer.Tokenizer, *Error) {
	if name == "" {
		return ModelInfo{}, nil, badRequest("model", "missing_required_parameter", "You must provide a model parameter.")
	}
	if err := catalog.ValidName(name); err != nil {
		return ModelInfo{}, nil, badRequest("model", "invalid_value", "%v: a model name has no path separators, glob or control characters.", err)
	}
	info, tok, err := s.cfg.Models.Lookup(name)
	if errors.Is(err, ErrModelNotFound) && s.cfg.Joining != nil && s.cfg.Joining() {
		return info, nil, joining(name)
	}
	if errors.Is(err, ErrModelNotFound) {
		return info, nil, modelNotFound(name)
	}
	if errors.Is(err, ErrNoRoom) {
		return info, nil, noRoom(name, err)
	}
	if err != nil {
		return info, nil, serverError(fmt.Errorf("model %q: %w", name, err))
	}
	return info, tok, nil
}

// fits rejects a prompt that leaves no room to generate.
func (s *Server) fits(info ModelInfo, n int) *Error {
	if s.cfg.MaxPromptTokens > 0 && n > s.cfg.MaxPromptTokens {
		return badRequest("messages", "context_length_exceeded",
			"The prompt has %d tokens; this server takes at most %d.", n, s.cfg.MaxPromptTokens)
	}
	if info.ContextLength > 0 && n >= info.ContextLength {
		return badRequest("messages", "context_length_exceeded",
			"This model's maximum context length is %d tokens; the prompt has %d tokens, which leaves no room for an answer.", info.ContextLength, n)
	}
	return nil
}

// fitsBytes rejects, before it is tokenized, a prompt of n bytes that
// cannot fit: no token stands for more input than its own text, so it has
// at least n/MaxTokenBytes tokens. Tokenizing megabytes takes seconds.
func (s *Server) fitsBytes(info ModelInfo, tok *tokenizer.Tokenizer, n int, param string) *Error {
	limit := s.cfg.MaxPromptTokens
	if info.ContextLength > 0 && (limit <= 0 || info.ContextLength-1 < limit) {
		limit = info.ContextLength - 1
	}
	if limit <= 0 {
		return nil
	}
	per := max(tok.MaxTokenBytes(), 4)
	if least := (n + per - 1) / per; least > limit {
		return badRequest(param, "context_length_exceeded",
			"The prompt has %d bytes, so at least %d tokens; this model takes at most %d.", n, least, limit)
	}
	return nil
}

// maxStops bounds the stop strings of one request (OpenAI allows 4).
const maxStops = 16

func parseStop(raw json.RawMessage) ([]string, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or an array of strings.")
	}
	if len(many) > maxStops {
		return nil, badRequest("stop", "invalid_value", "At most %d stop strings are supported, got %d.", maxStops, len(many))
	}
	return many, nil
}

func isTrue(raw json.RawMessage) bool {
	var b bool
	return json.Unmarshal(raw, &b) == nil && b
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

func randomID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// empty says whether an optional JSON field is absent, null, "" or [].
func empty(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`""`)) || bytes.Equal(raw, []byte("[]"))
}

// writeAnswer sends v as a JSON answer (status 200), as every surface
// sends what it does not stream.
func writeAnswer(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}
