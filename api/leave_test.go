package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"strata/runtime/engine"
)

// gateGen answers one token once its gate opens.
type gateGen struct {
	started chan struct{}
	gate    chan struct{}
}

func (g gateGen) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	g.started <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	}
	if err := onToken(engine.Token{ID: 5, Text: "ok"}); err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Tokens: []int{5}, Text: "ok", FinishReason: "length"}, nil
}

// TestLeaveRefusesNewFinishesRunning: once the node leaves, every
// generation endpoint answers 503 with Retry-After in its own error
// shape, the answer already running finishes, and the drained channel
// closes only then.
func TestLeaveRefusesNewFinishesRunning(t *testing.T) {
	g := gateGen{started: make(chan struct{}, 1), gate: make(chan struct{})}
	s, hs := newTestServer(t, Config{Generator: g, Models: storiesLocal(t)})
	running := make(chan int, 1)
	go func() {
		resp := post(t, hs.URL+"/v1/completions", "", `{"model": "stories260K", "prompt": "x", "max_tokens": 1}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		running <- resp.StatusCode
	}()
	<-g.started
	drained := s.Leave()
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}`, `"code":"node_leaving"`},
		{"/v1/messages", `{"model": "stories260K", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}`, `"type":"error"`},
		{"/api/chat", `{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}`, `leaving the cluster`},
		{"/api/strata/generate", `{"model": "stories260K", "prompt": "x"}`, `leaving the cluster`},
	} {
		resp := post(t, hs.URL+tc.path, "", tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s while leaving: %d, Retry-After %q, %s", tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	if resp, err := http.Get(hs.URL + "/v1/models"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/models while leaving: %v %v", resp, err)
	}
	select {
	case <-drained:
		t.Fatal("drained before the running answer finished")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	if code := <-running; code != http.StatusOK {
		t.Errorf("the running answer ended with %d", code)
	}
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("not drained after the running answer finished")
	}
	if again := s.Leave(); again != drained {
		t.Error("a second Leave returned another channel")
	}
}

type busyGen struct{}

func (busyGen) Generate(context.Context, engine.Request, func(engine.Token) error) (engine.Result, error) {
	return engine.Result{}, fmt.Errorf("stage s: no room: %w", engine.ErrBusy)
}

// TestBusyIs503: a cluster with no room for another session answers 503
// with Retry-After (a refusal the client may retry), not a 500.
func TestBusyIs503(t *testing.T) {
	_, hs := newTestServer(t, Config{Generator: busyGen{}, Models: storiesLocal(t)})
	resp := post(t, hs.URL+"/v1/chat/completions", "", `{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "cluster_busy") {
		t.Errorf("busy: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

// tokenThenWaitGen sends one token, then waits for its context to end.
type tokenThenWaitGen struct{}

func (tokenThenWaitGen) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	if err := onToken(engine.Token{ID: 5, Text: "ok"}); err != nil {
		return engine.Result{}, err
	}
	<-ctx.Done()
	return engine.Result{}, ctx.Err()
}

// TestStoppedNodeEndsStreamWithError: a stream cut because the node
// stops (its drain timeout passed) ends with an error event naming that,
// not silently as if the answer were complete (the soak's "stream ended
// without [DONE]"); a client that hangs up gets nothing more.
func TestStoppedNodeEndsStreamWithError(t *testing.T) {
	addr, stop, served := serveUntilStopped(t, tokenThenWaitGen{})
	resp := post(t, addr+"/v1/chat/completions", "", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("before the first token: %v", err)
		}
		if strings.Contains(line, `"content":"ok"`) {
			break
		}
	}
	stop()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream's end: %v", err)
	}
	if !strings.Contains(string(rest), `"code":"node_stopped"`) || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("after the node stopped the stream sent:\n%s", rest)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Error("Serve did not return after its context ended")
	}
}

// waitGen sends nothing: it waits for its context to end.
type waitGen struct{}

func (waitGen) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	<-ctx.Done()
	return engine.Result{}, ctx.Err()
}

// TestStoppedNodeBeforeTheFirstTokenRefuses: a request whose node stops
// before its answer began gets a 503 saying so (OpenAI's code
// node_stopped: send it to another node), not an empty 200 — which a streaming client read as a
// stream that ended without [DONE] (the soak lost one so, seed 30, a
// node leaving for a restart), on every API.
func TestStoppedNodeBeforeTheFirstTokenRefuses(t *testing.T) {
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`},
		{"/v1/messages", `{"model": "stories260K", "stream": true, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}`},
		{"/api/chat", `{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}`},
	} {
		addr, stop, served := serveUntilStopped(t, waitGen{})
		time.AfterFunc(200*time.Millisecond, stop)
		resp := post(t, addr+c.path, "", c.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "stopped before the answer") { // each API's error form
			t.Errorf("%s: the node stopped before the first token: %d %s", c.path, resp.StatusCode, b)
		}
		<-served
	}
}

// serveUntilStopped serves an API over gen on a loopback port: its base
// URL, what stops the node (ends Serve's context), and Serve's result.
func serveUntilStopped(t *testing.T, gen Generator) (string, func(), <-chan error) {
	t.Helper()
	s, err := NewServer(Config{Generator: gen, Models: storiesLocal(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), stop, served
}

// TestContextEndedUnderAReadingClient: a request whose context ends for
// another reason than the node stopping while its client still reads (the
// soak lost an answer this way: an empty 200, read as a stream that ended
// without [DONE]) gets an error it can act on, in its endpoint's shape:
// a 503 before the answer began, an error event in a stream begun.
func TestContextEndedUnderAReadingClient(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		gen              Generator
		wantStatus       int
		want             string
	}{
		{"not begun", "/v1/chat/completions", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`,
			gateGen{started: make(chan struct{}, 1), gate: make(chan struct{})}, http.StatusServiceUnavailable, `"code":"request_cancelled"`},
		{"begun", "/v1/chat/completions", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`,
			tokenThenWaitGen{}, http.StatusOK, `"code":"request_cancelled"`},
		{"ollama not begun", "/api/chat", `{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}`,
			gateGen{started: make(chan struct{}, 1), gate: make(chan struct{})}, http.StatusServiceUnavailable, `cancelled before its answer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(Config{Generator: tc.gen, Models: storiesLocal(t)})
			if err != nil {
				t.Fatal(err)
			}
			// The request's context ends 100 ms in, the connection stays.
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				time.AfterFunc(100*time.Millisecond, cancel)
				s.Handler().ServeHTTP(w, r.WithContext(ctx))
			})
			hs := httptest.NewServer(h)
			defer hs.Close()
			resp := post(t, hs.URL+tc.path, "", tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(b), tc.want) {
				t.Errorf("%d %s; want %d with %s", resp.StatusCode, b, tc.wantStatus, tc.want)
			}
			if strings.Contains(string(b), "[DONE]") {
				t.Errorf("a cut stream ends with [DONE]: %s", b)
			}
		})
	}
}
