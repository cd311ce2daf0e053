package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/runtime/engine"
)

// words is a fake Generator that streams the prompt's words back.
type words struct{ delay time.Duration }

func (g words) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	if req.Model != "echo" {
		return engine.Result{}, errors.New(`model "` + req.Model + `" not found`)
	}
	var res engine.Result
	for i, w := range strings.Fields(req.Prompt) {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		time.Sleep(g.delay)
		res.Tokens = append(res.Tokens, i)
		if err := onToken(engine.Token{ID: i, Index: i, Text: w + " "}); err != nil {
			return res, err
		}
	}
	res.FinishReason = engine.FinishStop
	return res, nil
}

func TestGenerateStreams(t *testing.T) {
	srv := httptest.NewServer(GenerateHandler(words{}))
	defer srv.Close()
	var got strings.Builder
	final, err := StreamGenerate(context.Background(), srv.URL, "", GenerateRequest{Model: "echo", Prompt: "a b c"}, func(s string) error {
		got.WriteString(s)
		return nil
	})
	if err != nil || got.String() != "a b c " || final.Tokens != 3 || final.FinishReason != "stop" {
		t.Errorf("%v %q %+v", err, got.String(), final)
	}
	if _, err := StreamGenerate(context.Background(), srv.URL, "", GenerateRequest{Model: "nope", Prompt: "x"}, func(string) error { return nil }); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown model: %v", err)
	}
	for _, body := range []string{"{", `{"model": "echo", "bogus": 1}`, `{"prompt": "x"}`, `{"model": "echo", "top_p": 3}`} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	if _, err := StreamGenerate(context.Background(), "http://127.0.0.1:1", "", GenerateRequest{Model: "echo"}, nil); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("no server: %v", err)
	}
}

func TestClientDisconnectCancels(t *testing.T) {
	done := make(chan error, 1)
	g := cancelWatcher{done: done}
	srv := httptest.NewServer(GenerateHandler(g))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		StreamGenerate(ctx, srv.URL, "", GenerateRequest{Model: "echo", Prompt: "x"}, func(string) error { cancel(); return nil })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("generation ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("generation not cancelled")
	}
}

// cancelWatcher streams until its context ends, then reports why.
type cancelWatcher struct{ done chan error }

func (g cancelWatcher) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	for i := 0; ; i++ {
		if err := onToken(engine.Token{ID: i, Text: "x"}); err != nil {
			g.done <- err
			return engine.Result{}, err
		}
		select {
		case <-ctx.Done():
			g.done <- ctx.Err()
			return engine.Result{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// bursts is a fake Generator whose tokens come in threes, each but the
// third saying that another follows at once (engine.Token.More), as a
// speculative step's checked tokens do; with more false, none says so.
type bursts struct{ more bool }

func (g bursts) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	var res engine.Result
	for i := range 9 {
		res.Tokens = append(res.Tokens, 100+i)
		if err := onToken(engine.Token{ID: 100 + i, Index: i, Text: fmt.Sprintf("t%d ", i), More: g.more && i%3 != 2}); err != nil {
			return res, err
		}
	}
	res.FinishReason = engine.FinishLength
	return res, nil
}

// flushCounter keeps what had been written at each flush that reaches
// the connection.
type flushCounter struct {
	*httptest.ResponseRecorder
	at []string
}

func (f *flushCounter) Flush() { f.at = append(f.at, f.Body.String()); f.ResponseRecorder.Flush() }

// Tokens that follow at once reach the client in one write: a stream's
// flush waits for the last of them (and no longer), and the bytes sent
// are the same.
func TestTokensThatFollowAtOnceShareAFlush(t *testing.T) {
	for _, c := range []struct{ path, body string }{
		{"/api/strata/generate", `{"model": "stories260K", "prompt": "x"}`},
		{"/v1/chat/completions", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "x"}]}`},
	} {
		var flushes [2]int
		var bodies [2]string
		for i, more := range []bool{false, true} {
			s, _ := newTestServer(t, Config{Generator: bursts{more: more}, Models: storiesLocal(t)})
			req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			req.Host = "127.0.0.1"
			req.Header.Set("Content-Type", "application/json")
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			s.Handler().ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: status %d: %s", c.path, w.Code, w.Body.String())
			}
			flushes[i], bodies[i] = len(w.at), w.Body.String()
			if more {
				// Each burst went out as soon as its last token came.
				for _, last := range []int{2, 5} {
					if !slices.ContainsFunc(w.at, func(b string) bool {
						return strings.Contains(b, fmt.Sprintf("t%d ", last)) && !strings.Contains(b, fmt.Sprintf("t%d ", last+1))
					}) {
						t.Errorf("%s: no flush right after t%d: %q", c.path, last, w.at)
					}
				}
			}
		}
		// The "created" and "id" fields of a chat stream differ from run to run.
		same := func(s string) string {
			return regexp.MustCompile(`"(id|created)":("[^"]*"|[0-9]+)`).ReplaceAllString(s, "")
		}
		if same(bodies[0]) != same(bodies[1]) || !strings.Contains(bodies[1], "t8 ") {
			t.Errorf("%s: the stream changed:\n%s\n%s", c.path, bodies[0], bodies[1])
		}
		// Six tokens say another follows (a chat stream's first, opening
		// event goes out with the first token's, one flush fewer still).
		if flushes[0]-flushes[1] < 6 {
			t.Errorf("%s: %d flushes with tokens that follow at once, %d without: want 6 fewer", c.path, flushes[1], flushes[0])
		}
	}
}
