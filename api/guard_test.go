package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"strata/runtime/engine"
)

// countingGen answers every generation at once with no tokens and counts them.
type countingGen struct{ n atomic.Int32 }

func (g *countingGen) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	g.n.Add(1)
	return engine.Result{FinishReason: engine.FinishStop}, nil
}

// TestGuardRefusesWebPages sends what a web page can make a browser send
// to 127.0.0.1 (a text/plain POST, a cross-origin one, one through a
// rebound DNS name) and what the API's own dashboard and programs send.
func TestGuardRefusesWebPages(t *testing.T) {
	gen := &countingGen{}
	_, hs := newTestServer(t, Config{Generator: gen, Models: storiesLocal(t), AllowedHosts: []string{"studio.lan"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	const chat = `{"model": "stories260K", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}`
	cases := []struct {
		name, method, path, host, body string
		header                         map[string]string
		status                         int
		generates                      bool
	}{
		{"program", "POST", "/v1/chat/completions", "", chat, map[string]string{"Content-Type": "application/json"}, 200, true},
		{"dashboard", "POST", "/v1/chat/completions", "", chat, map[string]string{"Content-Type": "application/json; charset=utf-8",
			"Origin": hs.URL, "Sec-Fetch-Site": "same-origin"}, 200, true},
		{"localhost name", "POST", "/v1/chat/completions", "localhost:" + port, chat, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:" + port}, 200, true},
		{"configured name", "GET", "/v1/models", "studio.lan:" + port, "", nil, 200, false},
		{"text/plain simple request", "POST", "/v1/chat/completions", "", chat, map[string]string{"Content-Type": "text/plain"}, 415, false},
		{"form simple request", "POST", "/v1/completions", "", `{"model": "stories260K", "prompt": "x"}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, false},
		{"no content type", "POST", "/api/strata/generate", "", `{"model": "stories260K", "prompt": "x"}`, nil, 415, false},
		{"ollama, curl -d", "POST", "/api/generate", "", `{"model": "stories260K", "prompt": "x", "stream": false, "options": {"num_predict": 1}}`,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200, true},
		{"ollama, form from a page", "POST", "/api/generate", "", `{"model": "stories260K", "prompt": "x"}`,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": hs.URL}, 415, false},
		{"ollama, text/plain from a page (same-origin marks only)", "POST", "/api/chat", "", `{"model": "stories260K", "messages": []}`,
			map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors"}, 415, false},
		{"ollama, text/plain from an old page (Referer only)", "POST", "/api/chat", "", `{"model": "stories260K", "messages": []}`,
			map[string]string{"Content-Type": "text/plain", "Referer": "http://evil.example/"}, 415, false},
		{"cross-origin", "POST", "/v1/chat/completions", "", chat, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, false},
		{"other port, same site", "POST", "/api/strata/generate", "", `{"model": "stories260K", "prompt": "x"}`, map[string]string{"Content-Type": "application/json",
			"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"}, 403, false},
		{"sandboxed page", "POST", "/v1/chat/completions", "", chat, map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403, false},
		{"cross-site read", "GET", "/api/cluster", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, false},
		{"rebound name, read", "GET", "/api/cluster", "evil.example:" + port, "", nil, 403, false},
		{"rebound name, generate", "POST", "/v1/chat/completions", "evil.example:" + port, chat, map[string]string{"Content-Type": "application/json",
			"Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin"}, 403, false},
		{"dashboard linked from elsewhere", "GET", "/", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := gen.n.Load()
			req, err := http.NewRequest(c.method, hs.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.host != "" {
				req.Host = c.host
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("status %s, want %d: %s", resp.Status, c.status, body)
			}
			if ran := gen.n.Load() != before; ran != c.generates {
				t.Errorf("generation ran: %v, want %v", ran, c.generates)
			}
		})
	}

	// With an API key the key is the boundary: any name reaches the key check.
	_, keyed := newTestServer(t, Config{Generator: gen, Models: storiesLocal(t), APIKey: "k"})
	req, _ := http.NewRequest("GET", keyed.URL+"/v1/models", nil)
	req.Host = "studio.lan"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("keyed server, unknown host, no key: %s, want 401", resp.Status)
	}
}

// serve runs s on a loopback listener with the real http.Server settings
// of Serve, and returns its base URL.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

// slowRequest opens a connection, sends the headers of a POST and the
// first byte of its body, and leaves it there.
func slowRequest(t *testing.T, base, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", path)
	return c
}

// TestSlowBodyHoldsNoSlot: with one generation slot, a client trickling
// its body in must not take the slot from a client that sent everything.
func TestSlowBodyHoldsNoSlot(t *testing.T) {
	gen := &countingGen{}
	s, err := NewServer(Config{Generator: gen, Models: storiesLocal(t), MaxActive: 1, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, s)
	for _, path := range []string{"/api/strata/generate", "/v1/completions"} {
		slowRequest(t, base, path)
	}
	time.Sleep(200 * time.Millisecond) // the slow requests reach their handlers
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := StreamGenerate(ctx, base, "", GenerateRequest{Model: "stories260K", Prompt: "x", MaxTokens: 1}, func(string) error { return nil })
	if err != nil {
		t.Fatalf("a complete request behind two slow ones: %v", err)
	}
	if !ev.Done || gen.n.Load() != 1 {
		t.Errorf("final event %+v, %d generations", ev, gen.n.Load())
	}
}

// TestReadTimeout: a body that does not arrive in time is answered (and
// the connection closed) instead of being waited for.
func TestReadTimeout(t *testing.T) {
	s, err := NewServer(Config{Generator: &countingGen{}, Models: storiesLocal(t), ReadTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := slowRequest(t, serve(t, s), "/v1/chat/completions")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %s, want 408", resp.Status)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still waits for the body after %s", time.Since(start))
	} // else the server closed the connection: also an answer
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %s, ReadTimeout is 300ms", d)
	}
}

// floodGen streams 64 KiB tokens until a write fails or ctx ends, and
// reports how it ended.
type floodGen struct{ ended chan error }

func (g floodGen) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	chunk := strings.Repeat("x", 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			g.ended <- err
			return engine.Result{}, err
		}
		if err := onToken(engine.Token{Text: chunk}); err != nil {
			g.ended <- err
			return engine.Result{}, err
		}
	}
}

// TestStalledReaderFreesSlot: a client that asks for a stream and stops
// reading it (its connection stays open) loses the stream once a write
// has waited WriteTimeout, and its slot goes to the next request.
func TestStalledReaderFreesSlot(t *testing.T) {
	ended := make(chan error, 4)
	s, err := NewServer(Config{Generator: floodGen{ended: ended}, Models: storiesLocal(t), MaxActive: 1, WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, s)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"model": "stories260K", "prompt": "x", "stream": true}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "timeout") {
			t.Logf("the stream ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stream to a client that stopped reading still holds its slot after 15 s")
	}
}
