package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chzyer/readline"

	"strata/api"
	"strata/internal/testdata"
	"strata/runtime/engine"
)

// greedy is what the engine generates from prompt.
func greedy(t *testing.T, e *engine.Engine, prompt string, n int) string {
	t.Helper()
	res, err := e.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res.Text
}

// TestChatStartsInProcess: with nothing listening at --api, chat runs the
// model file itself; piped input is read line by line.
func TestChatStartsInProcess(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	e, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want := greedy(t, e, "Once upon a time", 16)

	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader("Once upon a time\n/stats\n/exit\n"))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"chat", "--api", "127.0.0.1:1", "--model", path, "--temperature", "0", "--max-tokens", "16", "--threads", "1"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "running stories260K in this process") {
		t.Errorf("stderr: %s", errOut.String())
	}
	if !strings.Contains(out.String(), want+"\n") || !strings.Contains(out.String(), "16 tokens generated") {
		t.Errorf("output lacks the answer %q or the stats:\n%s", want, out.String())
	}

	// No node and no model file: a clear error.
	root = newRoot()
	root.SetIn(strings.NewReader(""))
	root.SetOut(io.Discard)
	root.SetArgs([]string{"chat", "--api", "127.0.0.1:1"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no node answers") || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no node, no model: %v", err)
	}
}

// script is a lineReader that plays lines; a line "^C" is Ctrl-C at the
// prompt and a line ending in "<paste>" is followed at once by more pasted input.
type script struct {
	lines   []string
	pasted  bool
	prompts []string
}

func (s *script) Readline() (string, error) {
	if len(s.lines) == 0 {
		return "", io.EOF
	}
	l := s.lines[0]
	s.lines = s.lines[1:]
	if l == "^C" {
		return "", readline.ErrInterrupt
	}
	l, s.pasted = strings.CutSuffix(l, "<paste>")
	return l, nil
}
func (s *script) SetPrompt(p string) { s.prompts = append(s.prompts, p) }
func (s *script) Pasted() bool       { return s.pasted }

// recorder keeps the messages of each chat request a handler receives.
type recorder struct {
	mu   sync.Mutex
	reqs [][]chatMessage
	temp []float64
	next http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/v1/chat/completions" {
		b, _ := io.ReadAll(req.Body)
		var body struct {
			Messages    []chatMessage `json:"messages"`
			Temperature float64       `json:"temperature"`
		}
		json.Unmarshal(b, &body)
		r.mu.Lock()
		r.reqs = append(r.reqs, body.Messages)
		r.temp = append(r.temp, body.Temperature)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.next.ServeHTTP(w, req)
}

func storiesServer(t *testing.T, gen api.Generator) (*httptest.Server, *recorder, *engine.Engine) {
	t.Helper()
	e, err := engine.Open(testdata.Path(t, "gguf/stories260K.gguf"), engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	local, err := api.NewLocal(e, "")
	if err != nil {
		t.Fatal(err)
	}
	if gen == nil {
		gen = local
	}
	srv, err := api.NewServer(api.Config{Generator: gen, Models: local})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: srv.Handler()}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	return hs, rec, e
}

func TestChatCommandsAndMessages(t *testing.T) {
	hs, rec, e := storiesServer(t, nil)
	var out bytes.Buffer
	in := &script{lines: []string{
		"/model", "/model nope", "/model stories260K", "/temp 3", "/temp 0", "/temp", "/stats", "/bogus",
		"Once upon a time", // an answer
		"/stats",
		"line one<paste>", "line two", // a pasted message of two lines
		"half typed<paste>", "^C", // dropped by Ctrl-C
		"/clear",
		`"""`, "block a", "", "block b", `"""`, // a """ block
		`cont \`, "inued", // a backslash continuation
		"/system Be brief.", "/clear", "Hi",
		"/exit", "never read",
	}}
	s := &chatSession{client: &chatClient{base: hs.URL, http: hs.Client()}, in: in, out: &out, model: "stories260K", models: []string{"stories260K"},
		temp: 0.7, maxTokens: 12, interrupts: make(chan struct{})}
	if err := s.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	want := greedy(t, e, "Once upon a time", 12)
	for _, w := range []string{
		"* stories260K\n", `no model "nope"`, "model: stories260K", "the temperature is a number", "temperature: 0\n", "no answer yet",
		"unknown command /bogus", want + "\n", "last answer: 5 prompt tokens, 12 tokens generated", "conversation cleared",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q:\n%s", w, text)
		}
	}
	if len(in.lines) != 1 {
		t.Errorf("/exit did not stop the loop: %v", in.lines)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	user := func(i int) []string {
		var us []string
		for _, m := range rec.reqs[i] {
			us = append(us, m.Role+":"+m.Content)
		}
		return us
	}
	if len(rec.reqs) != 5 {
		t.Fatalf("%d requests: %v", len(rec.reqs), rec.reqs)
	}
	for i, w := range [][]string{
		{"user:Once upon a time"},
		{"user:Once upon a time", "assistant:" + want, "user:line one\nline two"},
		{"user:block a\n\nblock b"},
		{"user:block a\n\nblock b", "assistant:" + strings.Join(nil, ""), "user:cont \ninued"},
		{"system:Be brief.", "user:Hi"},
	} {
		got := user(i)
		if i == 3 { // the assistant's answer to the block is whatever the model said
			got[1] = "assistant:"
		}
		if strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("request %d: %q, want %q", i, got, w)
		}
	}
	if rec.temp[0] != 0 {
		t.Errorf("temperature sent: %v", rec.temp)
	}
}

// streamer streams "x" until its context ends, then reports why.
type streamer struct{ done chan error }

func (g streamer) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	for i := 0; ; i++ {
		if err := onToken(engine.Token{ID: 300, Index: i, Text: "x"}); err != nil {
			g.done <- err
			return engine.Result{}, err
		}
		select {
		case <-ctx.Done():
			g.done <- ctx.Err()
			return engine.Result{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// notifyWriter signals the first write that contains "x".
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
	once  sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("x")) {
		w.once.Do(func() { close(w.first) })
	}
	return w.buf.Write(p)
}

// TestChatCtrlCStopsAnswer: Ctrl-C while an answer streams stops that
// answer (the generation is cancelled) and the prompt goes on.
func TestChatCtrlCStopsAnswer(t *testing.T) {
	done := make(chan error, 1)
	hs, _, _ := storiesServer(t, streamer{done})
	out := &notifyWriter{first: make(chan struct{})}
	interrupts := make(chan struct{}, 1)
	in := &script{lines: []string{"tell me", "/stats", "/exit"}}
	s := &chatSession{client: &chatClient{base: hs.URL, http: hs.Client()}, in: in, out: out, model: "stories260K", interrupts: interrupts}
	go func() {
		<-out.first
		interrupts <- struct{}{}
	}()
	if err := s.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the generation ended without being cancelled")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the generation was not cancelled")
	}
	out.mu.Lock()
	text := out.buf.String()
	out.mu.Unlock()
	if !strings.Contains(text, "(stopped)") || !strings.Contains(text, "finish: stopped") || len(in.lines) != 0 {
		t.Errorf("after Ctrl-C the prompt did not go on:\n%s", text)
	}
	if len(s.history) != 2 || !strings.HasPrefix(s.history[1].Content, "x") {
		t.Errorf("history after a stopped answer: %+v", s.history)
	}
}

func TestPasteReader(t *testing.T) {
	for _, tc := range []struct {
		reads []string
		want  []lineEnd
	}{
		{[]string{"typed\r"}, []lineEnd{{}}},
		{[]string{"a\rb\rc", "\r"}, []lineEnd{{pasted: true}, {pasted: true}, {}}},
		{[]string{"a\nb\n"}, []lineEnd{{pasted: true}, {}}},
		{[]string{"x\r\ny\r\n"}, []lineEnd{{pasted: true}, {crlf: true}, {}, {crlf: true}}},
	} {
		p := &pasteReader{r: io.NopCloser(&chunks{parts: tc.reads})}
		io.ReadAll(p)
		var got []lineEnd
		for range tc.want {
			got = append(got, p.next())
		}
		if len(p.ends) != 0 || !equalEnds(got, tc.want) {
			t.Errorf("%q: %+v (left %v), want %+v", tc.reads, got, p.ends, tc.want)
		}
	}
}

func equalEnds(a, b []lineEnd) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// chunks returns one part per Read, as a terminal delivers input.
type chunks struct{ parts []string }

func (c *chunks) Read(b []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.parts[0])
	c.parts = c.parts[1:]
	return n, nil
}
