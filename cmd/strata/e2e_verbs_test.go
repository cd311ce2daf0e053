//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/internal/testdata"
)

// Three real node processes on one host find each other's shared memory
// by themselves (auto), and the greedy text equals one node's over shm,
// over tcp, under the Apple constraints and with a corrupt frame injected;
// tokens/s over each is logged.
func TestE2ESideChannel(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	const n = 200
	want := runLocal(t, bin, stories, "Tim and Sue found a box.", n)
	for _, tc := range []struct {
		name, link string
		args       []string
		fallback   bool
	}{
		{"auto", "shm", nil, false},
		{"tcp", "tcp", []string{"--transport", "tcp"}, false},
		{"apple", "shm", []string{"--transport", "shm", "--verbs-apple"}, false},
		{"corrupt", "tcp", []string{"--verbs-faults", "corrupt@5"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--context", "512"}, tc.args...)
			c := newCluster(t, bin, map[string]string{"stories260K": stories}, 3, "800kB", args...)
			for _, p := range c.nodes {
				c.waitMembers(p, 3)
			}
			last := c.nodes[2]
			runViaAPI(t, bin, last.api, "stories260K", "Tim and Sue found a box.", 4) // loads the shards
			start := time.Now()
			got := runViaAPI(t, bin, last.api, "stories260K", "Tim and Sue found a box.", n)
			took := time.Since(start)
			if got != want {
				t.Fatalf("got %q\nwant %q", got, want)
			}
			t.Logf("%s: %d tokens in %v, %.0f tokens/s (3 processes, stories260K)", tc.name, n, took, n/took.Seconds())
			fallbacks := 0
			var rtts []int64
			for _, p := range c.nodes {
				st := clusterStatusOf(t, p.api)
				own, all := 0, 0
				for _, m := range st.Members {
					for _, l := range m.Links {
						all++
						if m.PeerID == st.Self {
							own++
							rtts = append(rtts, l.RTTMicros)
						}
						if l.Transport != tc.link && !(tc.fallback && l.Transport == "shm") {
							t.Errorf("%s: link from %s to %s is %s, want %s", p.name, m.PeerID, l.PeerID, l.Transport, tc.link)
						}
					}
				}
				// Its own two, and the others' from their heartbeats.
				if own != 2 || all != 6 {
					t.Errorf("%s shows %d links of its own and %d in all, want 2 and 6: %+v", p.name, own, all, st.Members)
				}
				resp, err := http.Get("http://" + p.api + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, line := range strings.Split(string(body), "\n") {
					var v int
					if _, err := fmt.Sscanf(line, "strata_link_fallbacks_total %d", &v); err == nil {
						fallbacks += v
					}
				}
			}
			if tc.fallback != (fallbacks > 0) {
				t.Errorf("%d fallbacks counted (a fault injected: %v)", fallbacks, tc.fallback)
			}
			// Each link's ping: a few hundred microseconds on loopback or
			// shared memory, with single readings of several ms when a
			// process is slow to wake on a loaded 2-core machine (other
			// test packages run beside this one). A reader parked where the
			// Go scheduler cannot see it made every reading 5-43 ms (median
			// 14.4 ms). So each link is read over five pings (one a second)
			// and keeps its best; the median of those bests must be under
			// 2 ms.
			best := map[string]int64{}
			for range 5 {
				time.Sleep(1100 * time.Millisecond)
				for _, p := range c.nodes {
					st := clusterStatusOf(t, p.api)
					for _, m := range st.Members {
						if m.PeerID != st.Self {
							continue
						}
						for _, l := range m.Links {
							k := p.name + ">" + l.PeerID
							if b, ok := best[k]; !ok || l.RTTMicros < b {
								best[k] = l.RTTMicros
							}
						}
					}
				}
			}
			bests := slices.Sorted(maps.Values(best))
			slices.Sort(rtts)
			t.Logf("%s: link round trips just after decoding %v µs, best of five pings per link %v µs", tc.name, rtts, bests)
			if len(bests) != 6 {
				t.Errorf("%s: %d links read, want 6", tc.name, len(bests))
			} else if bests[3] > 2000 {
				t.Errorf("%s: median of the links' best round trips %d µs, over 2 ms: %v", tc.name, bests[3], bests)
			}
		})
	}
}

// A synthetic tinyllama-1.1b cut to 6 layers (its full width: 8 KiB
// activations) on 3 processes: the greedy text over shared memory and
// over tcp equals one node's; tokens/s over each is logged.
func TestE2ESideChannelTinyllama(t *testing.T) {
	bin := buildBinary(t)
	model := filepath.Join(os.TempDir(), "strata-e2e-tinyllama-1.1b-6layers-q8_0-seed1.gguf")
	if _, err := os.Stat(model); err != nil {
		out, err := exec.Command(bin, "synth", "--shape", "tinyllama-1.1b", "--layers", "6", "--type", "Q8_0", "--seed", "1", "-o", model).CombinedOutput()
		if err != nil {
			t.Fatalf("synth: %v\n%s", err, out)
		}
	}
	const n = 48
	want := runLocal(t, bin, model, "hello world", n)
	for _, tc := range []struct {
		name, link string
		args       []string
	}{
		{"auto", "shm", nil},
		{"tcp", "tcp", []string{"--transport", "tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, bin, map[string]string{"tinyllama": model}, 3, "200MB", append([]string{"--context", "256"}, tc.args...)...)
			for _, p := range c.nodes {
				c.waitMembers(p, 3)
			}
			runViaAPI(t, bin, c.nodes[2].api, "tinyllama", "hello world", 4) // loads the shards
			start := time.Now()
			got := runViaAPI(t, bin, c.nodes[2].api, "tinyllama", "hello world", n)
			took := time.Since(start)
			if got != want {
				t.Fatalf("got %q\nwant %q", got, want)
			}
			t.Logf("%s: %d tokens in %v, %.1f tokens/s (3 processes, tinyllama-1.1b 6 layers Q8_0)", tc.name, n, took, n/took.Seconds())
			// The nodes picked the transport by themselves (auto: shm).
			for _, p := range c.nodes {
				st := clusterStatusOf(t, p.api)
				for _, m := range st.Members {
					for _, l := range m.Links {
						if m.PeerID == st.Self && l.Transport != tc.link {
							t.Errorf("%s: link to %s is %s, want %s", p.name, l.PeerID, l.Transport, tc.link)
						}
					}
				}
			}
		})
	}
}

// strata bench link runs two real processes per transport and prints one
// JSON line each: 8 KiB, 64 KiB and 1 MiB over shm, with tcp beside it.
// The numbers are logged (the target: an 8 KiB shm p50 under
// 10 µs); on a shared 2-core machine they are the scheduler's, so only
// their sanity is checked here.
func TestE2EBenchLink(t *testing.T) {
	bin := buildBinary(t)
	for _, size := range []int{8 << 10, 64 << 10, 1 << 20} {
		for _, transport := range []string{"shm", "tcp"} {
			out, err := exec.Command(bin, "bench", "link", "--transport", transport, "--bytes", fmt.Sprint(size), "--messages", "200", "--json").Output()
			if err != nil {
				t.Fatalf("bench link %s %d: %v\n%s", transport, size, err, out)
			}
			var res struct {
				Transport string  `json:"transport"`
				Bytes     int     `json:"bytes"`
				P50       float64 `json:"p50_us"`
				P99       float64 `json:"p99_us"`
				GBps      float64 `json:"throughput_gb_s"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("bench link output %q: %v", out, err)
			}
			if res.Transport != transport || res.Bytes != size || res.P50 <= 0 || res.P99 < res.P50 || res.GBps <= 0 {
				t.Fatalf("bench link %s %d: %+v", transport, size, res)
			}
			t.Logf("%s %7d bytes: p50 %7.1f µs, p99 %7.1f µs, %.2f GB/s", transport, size, res.P50, res.P99, res.GBps)
		}
	}
}
