//go:build e2e

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"strata/api"
	"strata/internal/testdata"
)

// TestE2ERollingUpgrade: three real nodes, a model that needs two of
// them (2 MB each; with KV for 4 sessions it needs 2.5 MB), four clients streaming without pause. Each node in turn gets
// SIGTERM and is restarted from a binary with another version string. No
// request fails and every answer is one node's. A client that reaches a
// node while it is down or leaving (connection refused, or 503
// node_leaving before any token) sends the request to the next node, as a
// load balancer would; those are counted, not failures.
func TestE2ERollingUpgrade(t *testing.T) {
	oldBin := buildVersion(t, "v0.9.0-rolling")
	newBin := buildVersion(t, "v1.0.0-rolling")
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	prompts := []string{"", "Tim and Sue found a box.", "The dog", "Once upon a time"}
	const maxTokens = 40
	wants := map[string]string{}
	for _, p := range prompts {
		wants[p] = strings.TrimSuffix(runLocal(t, oldBin, stories, p, maxTokens), "\n")
	}
	c := newCluster(t, oldBin, map[string]string{"stories260K": stories}, 3, "2000kB", "--context", "512", "--parallel", "4", "--drain-timeout", "60s")

	var served, redirected, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var lastToken [4]time.Time // per client, under mu
	var windowStart time.Time  // a leave in progress (under mu); zero between
	var worstGap time.Duration // the longest gap between a client's tokens within the window
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for client := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				prompt := prompts[(client+i)%len(prompts)]
				var text string
				for try := 0; ; try++ {
					p := c.nodes[(client+i+try)%len(c.nodes)]
					var got strings.Builder
					tokens := 0
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					_, err := api.StreamGenerate(ctx, "http://"+p.api, "", api.GenerateRequest{Model: "stories260K", Prompt: prompt, MaxTokens: maxTokens}, func(s string) error {
						got.WriteString(s)
						tokens++
						now := time.Now()
						mu.Lock()
						if !windowStart.IsZero() && lastToken[client].After(windowStart) {
							worstGap = max(worstGap, now.Sub(lastToken[client]))
						}
						lastToken[client] = now
						mu.Unlock()
						return nil
					})
					cancel()
					if err != nil && tokens == 0 && try < 6 && (strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), "cannot reach the node")) {
						redirected.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					if err != nil {
						failed.Add(1)
						mu.Lock()
						failures = append(failures, fmt.Sprintf("client %d on %s, prompt %q: %v (after %d tokens)", client, p.name, prompt, err, tokens))
						mu.Unlock()
						text = "\x00"
					} else {
						text = got.String()
					}
					break
				}
				if text == "\x00" {
					continue
				}
				if text != wants[prompt] {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("client %d, prompt %q:\n got %q\nwant %q", client, prompt, text, wants[prompt]))
					mu.Unlock()
					continue
				}
				served.Add(1)
			}
		})
	}

	time.Sleep(2 * time.Second) // traffic on the old cluster first
	for _, p := range c.nodes {
		before := served.Load()
		mu.Lock()
		windowStart, worstGap = time.Now(), 0
		mu.Unlock()
		start := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s exited with %v after SIGTERM", p.name, err)
			}
		case <-time.After(90 * time.Second):
			p.cmd.Process.Kill()
			t.Fatalf("%s did not exit within 90 s of SIGTERM", p.name)
		}
		left := time.Since(start)
		p.bin = newBin
		c.start(p)
		for _, q := range c.nodes {
			c.waitMembers(q, 3)
		}
		time.Sleep(time.Second) // the upgraded node takes traffic before the next leaves
		mu.Lock()
		gap := worstGap
		windowStart = time.Time{}
		mu.Unlock()
		t.Logf("%s: left in %v, back with %s; longest pause between a stream's tokens meanwhile %v; %d answers served meanwhile",
			p.name, left.Round(time.Millisecond), "v1.0.0-rolling", gap.Round(time.Millisecond), served.Load()-before)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	t.Logf("requests served: %d, sent on to another node: %d, failed: %d", served.Load(), redirected.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d requests failed:\n%s", failed.Load(), strings.Join(failures, "\n"))
	}
	if served.Load() < 12 {
		t.Errorf("only %d requests served", served.Load())
	}
	var st api.PeersStatus
	if err := getJSON("http://"+c.nodes[0].api+"/api/peers", &st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Version != "v1.0.0-rolling" {
			t.Errorf("member %s runs %q after the upgrade", m.PeerID, m.Version)
		}
	}
	if len(st.Members) != 3 {
		t.Errorf("%d members after the upgrade", len(st.Members))
	}
}
