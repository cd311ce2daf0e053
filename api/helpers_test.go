package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/engine"
	"strata/runtime/gguf"
)

// The stories260K engine is shared by the tests of this package: it is
// safe for concurrent Generate calls and takes a moment to load under -race.
var (
	storiesOnce sync.Once
	stories     *engine.Engine
	storiesErr  error
)

func storiesEngine(t testing.TB) *engine.Engine {
	t.Helper()
	path := testdata.Path(t, "gguf/stories260K.gguf")
	storiesOnce.Do(func() { stories, storiesErr = engine.Open(path, engine.Options{Threads: 1}) })
	if storiesErr != nil {
		t.Fatal(storiesErr)
	}
	return stories
}

// storiesLocal serves stories260K under the name "stories260K".
func storiesLocal(t testing.TB) *Local {
	t.Helper()
	l, err := NewLocal(storiesEngine(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newTestServer serves cfg (Generator and Models default to stories260K).
func newTestServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Generator == nil || cfg.Models == nil {
		l := storiesLocal(t)
		if cfg.Generator == nil {
			cfg.Generator = l
		}
		if cfg.Models == nil {
			cfg.Models = l
		}
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs
}

// expected is what the engine itself generates for tokens.
func expected(t testing.TB, tokens []int, maxTokens int, stop []string) engine.Result {
	t.Helper()
	res, err := storiesEngine(t).Generate(context.Background(), engine.Request{Tokens: tokens, MaxTokens: maxTokens, Stop: stop}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// post sends a JSON body (a string is sent as it is) with an optional key.
func post(t testing.TB, url, key string, body any) *http.Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case string:
		r = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(js))
	}
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// decode reads a JSON response body into v.
func decode(t testing.TB, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decoding a %s answer: %v", resp.Status, err)
	}
}

// sseResult is a streamed answer put back together.
type sseResult struct {
	text   string
	chunks int
	finish string
	usage  *Usage
	done   bool // saw [DONE]
	errMsg string
}

// readSSE reads a chat or completions event stream.
func readSSE(t testing.TB, resp *http.Response) sseResult {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %s, content type %q: %s", resp.Status, ct, b)
	}
	var out sseResult
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		if data == "[DONE]" {
			out.done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Delta        ChatDelta `json:"delta"`
				Text         string    `json:"text"`
				FinishReason *string   `json:"finish_reason"`
			} `json:"choices"`
			Usage *Usage `json:"usage"`
			Error *Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if ev.Error != nil {
			out.errMsg = ev.Error.Message
		}
		if ev.Usage != nil {
			out.usage = ev.Usage
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" || c.Text != "" {
				out.chunks++
			}
			out.text += c.Delta.Content + c.Text
			if c.FinishReason != nil {
				out.finish = *c.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// eachEvent decodes the data of each event of a stream into a T and
// hands it to f as it comes; "[DONE]" and lines other than data are
// passed over.
func eachEvent[T any](t testing.TB, body io.Reader, f func(T)) {
	t.Helper()
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		f(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// storiesWithTemplate writes a copy of stories260K whose metadata carries
// a chat template, and returns its path.
func storiesWithTemplate(t testing.TB, template string) string {
	t.Helper()
	f, err := gguf.Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata().Clone()
	if err := md.Set("tokenizer.chat_template", template); err != nil {
		t.Fatal(err)
	}
	var ts []gguf.WriteTensor
	for _, x := range f.Tensors() {
		ts = append(ts, gguf.WriteTensor{Name: x.Name, Type: x.Type, Dims: x.Dims, Data: f.Data(x)})
	}
	path := filepath.Join(t.TempDir(), "chatty.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(out)
	if err := gguf.Write(w, md, ts); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
