//go:build e2e

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"strata/internal/testdata"
)

// tinyllama4 is a synthetic tinyllama-1.1b cut to 4 layers, Q8_0: the
// real shapes (embedding and head of 32000 × 2048) in about 330 MB.
func tinyllama4(t *testing.T, bin string) string {
	t.Helper()
	path := filepath.Join(os.TempDir(), "strata-e2e-tinyllama-4layers-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	out, err := exec.Command(bin, "synth", "--shape", "tinyllama-1.1b", "--layers", "4", "--type", "Q8_0", "--seed", "1", "-o", path).CombinedOutput()
	if err != nil {
		t.Fatalf("synth: %v\n%s", err, out)
	}
	return path
}

// metricOf reads one unlabelled counter from a node's /metrics.
func metricOf(t *testing.T, apiAddr, name string) int64 {
	t.Helper()
	m, err := scrapeMetrics(apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m[name]
	if !ok {
		t.Fatalf("%s has no %s", apiAddr, name)
	}
	return int64(v)
}

// scrapeMetrics reads the unlabelled samples of a node's /metrics.
func scrapeMetrics(apiAddr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + apiAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m[name] = f
		}
	}
	return m, sc.Err()
}

// Three real processes; only a has stories260K and a tinyllama (4 layers
// of its real shape), and a offers too little memory to hold a stage: b
// and c hold the models' layers, fetched from a. A prompt on c generates
// what one node generates, b and c each fetched about their own layers'
// bytes, and after a is killed (SIGKILL) the cluster still generates from
// what b and c hold.
func TestE2ELayersFetchedFromPeers(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	tiny := tinyllama4(t, bin)
	files := map[string]string{"stories260K": stories, "tinyllama4": tiny}
	sizes := map[string]int64{}
	for name, p := range files {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = fi.Size()
	}
	prompts := map[string]string{"stories260K": "Tim and Sue found a box.", "tinyllama4": "hello world"}
	wants := map[string]string{}
	for name, p := range files {
		wants[name] = runLocal(t, bin, p, prompts[name], 24)
	}

	c := &cluster{t: t, bin: bin, dir: t.TempDir()}
	listen, api := localAddrs(t, 3)
	id, err := exec.Command(bin, "node", "id", "--data-dir", filepath.Join(c.dir, "a")).Output()
	if err != nil {
		t.Fatal(err)
	}
	c.join = listen[0] + "/p2p/" + strings.TrimSpace(string(id))
	// A stage of tinyllama4 is the embedding (or head) and 2 layers, about
	// 165 MB: 200 MB holds one, not the whole model.
	for i, name := range []string{"a", "b", "c"} {
		models := filepath.Join(c.dir, name+"-models")
		os.MkdirAll(models, 0o755)
		memory := "200MB"
		if name == "a" {
			memory = "1kB" // a only serves the files
			for n, p := range files {
				if err := os.Symlink(p, filepath.Join(models, n+".gguf")); err != nil {
					t.Fatal(err)
				}
			}
		}
		p := &proc{name: name, dataDir: filepath.Join(c.dir, name), listen: listen[i], api: api[i]}
		p.args = []string{"node", "--data-dir", p.dataDir, "--secret-file", filepath.Join(c.dir, "a", "secret"), "--no-mdns",
			"--listen", p.listen, "--api", p.api, "--models", models, "--stores", "none", "--memory", memory,
			"--parallel", "1", "--context", "256"}
		if i > 0 {
			p.args = append(p.args, "--join", c.join)
		}
		c.nodes = append(c.nodes, p)
		c.start(p)
	}
	t.Cleanup(func() {
		for _, p := range c.nodes {
			c.stop(p)
		}
		if t.Failed() {
			for _, p := range c.nodes {
				b, _ := os.ReadFile(p.log.Name())
				t.Logf("%s log:\n%s", p.name, lastLines(string(b), 30))
			}
		}
	})
	a, b, cc := c.nodes[0], c.nodes[1], c.nodes[2]
	for _, p := range c.nodes {
		c.waitMembers(p, 3)
	}

	fetched := map[string]int64{}
	for _, name := range []string{"stories260K", "tinyllama4"} {
		start := time.Now()
		got := runViaAPI(t, bin, cc.api, name, prompts[name], 24)
		if got != wants[name] {
			t.Errorf("%s on c, layers fetched from a:\n got %q\nwant %q", name, got, wants[name])
		}
		t.Logf("%s: 24 tokens via c in %v (including fetches and loads)", name, time.Since(start))
		var sum int64
		for _, p := range []*proc{b, cc} {
			f := metricOf(t, p.api, "strata_weights_fetched_bytes_total")
			t.Logf("  %s fetched %d bytes for %s (file %d bytes)", p.name, f-fetched[p.name], name, sizes[name])
			sum += f - fetched[p.name]
			fetched[p.name] = f
		}
		// b and c together fetch the file about once (each needs the
		// headers), never once each.
		if sum < sizes[name] || sum > sizes[name]+sizes[name]/8 {
			t.Errorf("%s: b and c fetched %d bytes of a %d-byte file", name, sum, sizes[name])
		}
	}
	// Each of b and c holds its own half of tinyllama4, and says so.
	for _, p := range []*proc{b, cc} {
		out, err := exec.Command(bin, "models", "--data-dir", p.dataDir, "--stores", "none", "--models", filepath.Join(c.dir, p.name+"-models")).CombinedOutput()
		t.Logf("strata models on %s:\n%s", p.name, out)
		if err != nil || !strings.Contains(string(out), "tinyllama4") || !strings.Contains(string(out), "partial") {
			t.Errorf("strata models on %s: %v", p.name, err)
		}
	}
	tinyFetched := map[string]int64{}
	for _, p := range []*proc{b, cc} {
		out, _ := exec.Command(bin, "models", "--json", "--data-dir", p.dataDir, "--stores", "none", "--models", filepath.Join(c.dir, p.name+"-models")).Output()
		if i := strings.Index(string(out), `"name": "tinyllama4"`); i >= 0 {
			rest := string(out)[i:]
			if j := strings.Index(rest, `"size_bytes": `); j >= 0 {
				var n int64
				fmt.Sscanf(rest[j+len(`"size_bytes": `):], "%d", &n)
				tinyFetched[p.name] = n
			}
		}
	}
	for name, n := range tinyFetched {
		t.Logf("%s holds %d bytes of tinyllama4 (%.0f%% of %d)", name, n, 100*float64(n)/float64(sizes["tinyllama4"]), sizes["tinyllama4"])
		if n <= 0 || n > sizes["tinyllama4"]*6/10 {
			t.Errorf("%s holds %d bytes of a %d-byte tinyllama4: not about its own half", name, n, sizes["tinyllama4"])
		}
	}
	if len(tinyFetched) != 2 {
		t.Errorf("tinyllama4 held in part by %v, want b and c", tinyFetched)
	}
	t.Logf("a served %d bytes", metricOf(t, a.api, "strata_weights_served_bytes_total"))

	// a, the only node with the files, is killed: b and c hold every
	// layer they run, and generate on.
	c.kill(a)
	deadline := time.Now().Add(15 * time.Second)
	for len(peersOf(t, cc.api)) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("c still sees a")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"stories260K", "tinyllama4"} {
		if got := runViaAPI(t, bin, cc.api, name, prompts[name], 24); got != wants[name] {
			t.Errorf("%s after a was killed:\n got %q\nwant %q", name, got, wants[name])
		}
	}
}

func peersOf(t *testing.T, apiAddr string) []string {
	t.Helper()
	var st struct {
		Members []struct {
			PeerID string `json:"peer_id"`
		} `json:"members"`
	}
	if err := getJSON("http://"+apiAddr+"/api/peers", &st); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range st.Members {
		out = append(out, m.PeerID)
	}
	return out
}
