package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"strata/internal/testdata"
	"strata/runtime/catalog"
	"strata/runtime/engine"
)

func TestQueueFIFO(t *testing.T) {
	var depth []int
	q := newQueue(1, 3, func(active, waiting int) { depth = append(depth, waiting) })
	ctx := context.Background()
	if place, err := q.Acquire(ctx); err != nil || place != 0 {
		t.Fatalf("a free slot: place %d, %v", place, err)
	}
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			place, err := q.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if place != i+1 {
				t.Errorf("waiter %d: place %d in line, want %d", i, place, i+1)
			}
			order <- i
		}()
		waitFor(t, func() bool { _, w := q.Len(); return w == i+1 }) // in line before the next one comes
	}
	if _, err := q.Acquire(ctx); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("beyond the bound: %v", err)
	}
	// A waiter that gives up leaves the line.
	cctx, cancel := context.WithCancel(ctx)
	q.bound = 4
	gaveUp := make(chan error)
	go func() { _, err := q.Acquire(cctx); gaveUp <- err }()
	waitFor(t, func() bool { _, w := q.Len(); return w == 4 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for want := range 3 {
		q.Release()
		if got := <-order; got != want {
			t.Fatalf("slot went to waiter %d, want %d", got, want)
		}
	}
	q.Release()
	if a, w := q.Len(); a != 0 || w != 0 {
		t.Errorf("after all releases: %d active, %d waiting", a, w)
	}
	if depth[len(depth)-1] != 0 || !containsInt(depth, 3) {
		t.Errorf("depth reports %v", depth)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestMetricsAndStats(t *testing.T) {
	s, hs := newTestServer(t, Config{APIKey: "k"})
	m := s.Metrics()
	m.ObserveHop("peerB", 3*time.Millisecond)
	m.ObserveHop("peerB", 5*time.Millisecond)
	m.ObserveStep(9 * time.Millisecond)
	m.AddBytesSent("peerB", 4096)
	var nilMetrics *Metrics // hooks on a nil *Metrics are no-ops
	nilMetrics.ObserveHop("x", time.Second)
	nilMetrics.AddBytesSent("x", 1)

	got := readSSE(t, post(t, hs.URL+"/v1/chat/completions", "k", map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 20, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}}}))
	if got.text == "" {
		t.Fatal("no text")
	}
	text := scrape(t, hs.URL, "k")
	for _, want := range []string{
		`strata_generated_tokens_total{model="stories260K"} 20`,
		`strata_time_to_first_token_seconds_count 1`,
		`strata_hop_latency_seconds_count{peer="peerB"} 2`,
		`strata_ring_step_seconds_count 1`,
		`strata_peer_sent_bytes_total{peer="peerB"} 4096`,
		`strata_api_queue_depth 0`,
		`strata_api_active_requests 0`,
		`strata_api_requests_total{code="200",endpoint="chat"} 1`,
		`strata_prompt_tokens_total{model="stories260K"}`,
		`strata_decode_tokens_per_second_count 1`,
		"strata_tokens_per_second ",
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "strata_tokens_per_second 0\n") {
		t.Error("tokens/s is 0 right after a generation")
	}

	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/stats", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	decode(t, resp, &st)
	if st.GeneratedTokens != 20 || st.TokensPerSecond <= 0 || st.LastTTFTMillis <= 0 || len(st.Peers) != 1 ||
		st.Peers[0] != (PeerStats{PeerID: "peerB", BytesSent: 4096, HopMillisMean: 4, Hops: 2}) {
		t.Errorf("stats: %+v", st)
	}

	req, _ = http.NewRequest(http.MethodGet, hs.URL+"/api/cluster", nil)
	req.Header.Set("Authorization", "Bearer k")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	var cs ClusterStatus
	decode(t, resp, &cs)
	if len(cs.Members) != 1 || cs.Members[0].Shards[0] != (ShardStatus{Model: "stories260K", Layers: [2]int{0, 5}}) {
		t.Errorf("cluster: %+v", cs)
	}
	b, _ := json.Marshal(cs)
	if !strings.Contains(string(b), `"layers":[0,5]`) {
		t.Errorf("cluster JSON: %s", b)
	}
}

func TestRateWindow(t *testing.T) {
	var w rateWindow
	base := time.Unix(1000, 0)
	for i := range 5 {
		w.add(base.Add(time.Duration(i)*time.Second), 10)
	}
	if r := w.rate(base.Add(4 * time.Second)); r != 10 {
		t.Errorf("rate %v, want 10", r)
	}
	if r := w.rate(base.Add(60 * time.Second)); r != 0 {
		t.Errorf("stale rate %v", r)
	}
}

func TestFileModels(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	fm := NewFileModels(catalog.Files{"stories260K": path}, func() []string { return []string{"stories260K", "elsewhere", "stories260K"} }, 512)
	defer fm.Close()
	list := fm.List()
	if len(list) != 1 || list[0].ID != "stories260K" || list[0].ContextLength != 512 || list[0].Layers != 5 || list[0].SizeBytes == 0 {
		t.Errorf("list: %+v", list)
	}
	if _, _, err := fm.Lookup("elsewhere"); !errors.Is(err, ErrModelNotFound) {
		t.Errorf("unknown: %v", err)
	}
	_, tok, err := fm.Lookup("stories260K")
	if err != nil || tok.VocabSize() != 512 {
		t.Fatalf("%v", err)
	}
	// A server over FileModels bounds prompts by the capped context.
	_, hs := newTestServer(t, Config{Models: fm, MaxPromptTokens: 8})
	checkError(t, post(t, hs.URL+"/v1/completions", "", `{"model": "stories260K", "prompt": "Once upon a time there was a girl named Lily"}`), 400, "context_length_exceeded")
	var p Completion
	decode(t, post(t, hs.URL+"/v1/completions", "", `{"model": "stories260K", "prompt": "Once", "max_tokens": 3, "temperature": 0}`), &p)
	if p.Usage == nil || p.Usage.CompletionTokens != 3 {
		t.Errorf("%+v", p)
	}
}

// A node whose engine speculates reports the guesses in the answer's
// usage (completion_tokens_details, OpenAI's predicted-output fields)
// and in /metrics; the text is the one without speculation.
func TestSpeculationUsageAndMetrics(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	e, err := engine.Open(path, engine.Options{Threads: 1, Draft: path, Speculate: engine.SpeculateDraft, GuessEveryStep: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	l, err := NewLocal(e, "")
	if err != nil {
		t.Fatal(err)
	}
	_, hs := newTestServer(t, Config{Generator: l, Models: l})
	_, plain := newTestServer(t, Config{})
	body := map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 40,
		"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}}}
	var got, want struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	for _, r := range []struct {
		url string
		out any
	}{{hs.URL, &got}, {plain.URL, &want}} {
		resp := post(t, r.url+"/v1/chat/completions", "", body)
		if err := json.NewDecoder(resp.Body).Decode(r.out); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(got.Choices) != 1 || len(want.Choices) != 1 || got.Choices[0].Message.Content != want.Choices[0].Message.Content {
		t.Fatalf("answer %+v, want %+v", got.Choices, want.Choices)
	}
	d := got.Usage.CompletionTokensDetails
	if d == nil || d.AcceptedPredictionTokens == 0 || want.Usage.CompletionTokensDetails != nil {
		t.Fatalf("usage %+v (without speculation %+v)", d, want.Usage.CompletionTokensDetails)
	}
	text := scrape(t, hs.URL, "")
	for _, want := range []string{
		fmt.Sprintf(`strata_speculative_accepted_tokens_total{model="stories260K"} %d`, d.AcceptedPredictionTokens),
		fmt.Sprintf(`strata_speculative_drafted_tokens_total{model="stories260K"} %d`, d.AcceptedPredictionTokens+d.RejectedPredictionTokens),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
