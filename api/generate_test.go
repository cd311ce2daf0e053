package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
