package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// A request is one of the kinds of traffic a client sends: its API, its
// body, and how to read the answer's text (what is compared with the
// reference node's).
type request struct {
	kind   string // openai-stream, anthropic, ollama, structured, tool, followup, cancel
	path   string
	body   map[string]any
	stream bool
	// cancelAfter > 0: the client hangs up after that many stream chunks.
	cancelAfter int
}

const model = "stories260K"

var prompts = []string{"Once upon a time", "Tim and Sue found a box.", "The dog", "Lily wanted a cat.", "One day, a little bird"}

// newRequest draws a request of a random kind.
func newRequest(rng *rand.Rand) request {
	p := prompts[rng.IntN(len(prompts))]
	user := []map[string]any{{"role": "user", "content": p}}
	switch rng.IntN(7) {
	case 0:
		return request{kind: "anthropic", path: "/v1/messages", body: map[string]any{"model": model, "max_tokens": 40, "temperature": 0, "messages": user}}
	case 1:
		return request{kind: "ollama", path: "/api/chat", body: map[string]any{"model": model, "stream": false, "messages": user, "options": map[string]any{"temperature": 0, "num_predict": 40}}}
	case 2:
		schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 12}, "age": map[string]any{"type": "integer", "minimum": 0, "maximum": 99}}, "required": []string{"name", "age"}}
		return request{kind: "structured", path: "/v1/chat/completions", body: map[string]any{"model": model, "max_tokens": 60, "temperature": 0, "messages": user,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": schema}}}}
	case 3:
		tool := map[string]any{"type": "function", "function": map[string]any{"name": "pet", "description": "name a pet",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 10}}, "required": []string{"name"}}}}
		return request{kind: "tool", path: "/v1/chat/completions", body: map[string]any{"model": model, "max_tokens": 40, "temperature": 0, "messages": user, "tools": []any{tool}, "tool_choice": "required"}}
	case 4:
		// A conversation's second turn: its first is in the prompt cache
		// when the same node answered it.
		msgs := []map[string]any{{"role": "user", "content": p}, {"role": "assistant", "content": "and then"}, {"role": "user", "content": "What happened next?"}}
		return request{kind: "followup", path: "/v1/chat/completions", body: map[string]any{"model": model, "max_tokens": 40, "temperature": 0, "messages": msgs, "stream": true}, stream: true}
	case 5:
		return request{kind: "cancel", path: "/v1/chat/completions", body: map[string]any{"model": model, "max_tokens": 80, "temperature": 0, "messages": user, "stream": true}, stream: true, cancelAfter: 3 + rng.IntN(10)}
	}
	return request{kind: "openai-stream", path: "/v1/chat/completions", body: map[string]any{"model": model, "max_tokens": 40, "temperature": 0, "messages": user, "stream": true}, stream: true}
}

// key identifies a request's body, for the reference's answers.
func (r request) key() string {
	b, _ := json.Marshal(r.body)
	return r.path + " " + string(b)
}

// outcome is what became of one request.
type outcome struct {
	text      string
	refused   bool // a clear 429/503, or a placement refusal in words
	cancelled bool // the client hung up on purpose
	// originKilled: the node answering was SIGKILLed while it did.
	originKilled bool
	err          error         // lost: anything else
	ttft         time.Duration // to the first streamed chunk (0: none)
	worstGap     time.Duration // the longest wait between two chunks
}

// send sends r to node n and reads the answer.
func send(ctx context.Context, n *node, r request) outcome {
	api := n.api
	body, _ := json.Marshal(r.body)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+r.path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if n.key != "" {
		req.Header.Set("Authorization", "Bearer "+n.key)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// No answer at all (refused, reset, or the node died before its
		// headers): nothing was generated for the client, which sends the
		// request to another node, as a load balancer would.
		return outcome{err: fmt.Errorf("cannot reach %s: %w", api, err), refused: ctx.Err() == nil}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		o := outcome{err: fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))}
		o.refused = resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests || isPlacementRefusal(string(msg))
		return o
	}
	if !r.stream {
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return outcome{err: err}
		}
		text, err := answerText(r.kind, v)
		return outcome{text: text, err: err, ttft: time.Since(start)}
	}
	// An OpenAI stream: data: {...choices[0].delta.content...}
	var text strings.Builder
	var o outcome
	last := time.Now()
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			o.text = text.String()
			return o
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			o.err = fmt.Errorf("bad stream event %q: %w", data, err)
			return o
		}
		if ev.Error != nil {
			o.err = errors.New(ev.Error.Message)
			o.refused = isPlacementRefusal(ev.Error.Message) || strings.Contains(ev.Error.Message, "cluster is busy")
			return o
		}
		now := time.Now()
		if chunks == 0 {
			o.ttft = now.Sub(start)
		} else {
			o.worstGap = max(o.worstGap, now.Sub(last))
		}
		last = now
		chunks++
		if len(ev.Choices) > 0 {
			text.WriteString(ev.Choices[0].Delta.Content)
		}
		if r.cancelAfter > 0 && chunks >= r.cancelAfter {
			o.cancelled = true
			return o
		}
	}
	if err := sc.Err(); err != nil {
		o.err = err
	} else {
		o.err = errors.New("the stream ended without [DONE]")
	}
	return o
}

// answerText is the text of a non-streamed answer of each API.
func answerText(kind string, v map[string]any) (string, error) {
	switch kind {
	case "anthropic":
		if c, ok := v["content"].([]any); ok && len(c) > 0 {
			if b, ok := c[0].(map[string]any); ok {
				if t, ok := b["text"].(string); ok {
					return t, nil
				}
			}
		}
	case "ollama":
		if m, ok := v["message"].(map[string]any); ok {
			if t, ok := m["content"].(string); ok {
				return t, nil
			}
		}
	case "structured", "tool":
		ch, _ := v["choices"].([]any)
		if len(ch) > 0 {
			msg, _ := ch[0].(map[string]any)["message"].(map[string]any)
			if kind == "tool" {
				calls, _ := msg["tool_calls"].([]any)
				if len(calls) > 0 {
					b, _ := json.Marshal(calls[0].(map[string]any)["function"])
					return string(b), nil
				}
			} else if t, ok := msg["content"].(string); ok {
				return t, nil
			}
		}
	}
	b, _ := json.Marshal(v)
	return "", fmt.Errorf("no %s answer in %.300s", kind, b)
}

// isPlacementRefusal: the survivors cannot hold the model, said in words.
func isPlacementRefusal(msg string) bool {
	return strings.Contains(msg, "cannot place") || strings.Contains(msg, "no node of the cluster")
}
