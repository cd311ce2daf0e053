//go:build e2e

// End-to-end tests with real `strata node` processes. They build the
// binary and a synthetic tinyllama-1.1b (cached in the temp directory), so
// they run in make test's second pass, without the race detector:
//
//	go test -tags e2e -run E2E ./cmd/strata
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"strata/api"
	"strata/internal/testdata"
)

// buildBinary builds strata once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	return buildVersion(t, "")
}

// buildVersion builds strata with the version string v stamped (as make
// build does); "" leaves the default.
func buildVersion(t *testing.T, v string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "strata")
	args := []string{"build", "-o", bin}
	if v != "" {
		args = append(args, "-ldflags", "-X main.version="+v)
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// tinyllama returns a synthetic tinyllama-1.1b Q8_0, written once and
// kept in the temp directory between runs (1.2 GB, about 20 s to write).
func tinyllama(t *testing.T, bin string) string {
	t.Helper()
	path := filepath.Join(os.TempDir(), "strata-e2e-tinyllama-1.1b-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	out, err := exec.Command(bin, "synth", "--shape", "tinyllama-1.1b", "--type", "Q8_0", "--seed", "1", "-o", path).CombinedOutput()
	if err != nil {
		t.Fatalf("synth: %v\n%s", err, out)
	}
	return path
}

// proc is one running strata node.
type proc struct {
	name, dataDir, api, listen string
	bin                        string // the binary it runs; "" = the cluster's
	args                       []string
	cmd                        *exec.Cmd
	log                        *os.File
}

// cluster starts n nodes sharing a secret and a models directory.
type cluster struct {
	t      *testing.T
	bin    string
	dir    string
	models string
	nodes  []*proc
	join   string
}

func newCluster(t *testing.T, bin string, models map[string]string, n int, memory string, extra ...string) *cluster {
	t.Helper()
	return newClusterEach(t, bin, models, n, memory, nil, extra...)
}

// newClusterEach is newCluster where node i also gets the flags each(i).
func newClusterEach(t *testing.T, bin string, models map[string]string, n int, memory string, each func(i int) []string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: t.TempDir()}
	c.models = filepath.Join(c.dir, "models")
	os.MkdirAll(c.models, 0o755)
	for name, path := range models {
		if err := os.Symlink(path, filepath.Join(c.models, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	listen, api := localAddrs(t, n)
	id, err := exec.Command(bin, "node", "id", "--data-dir", filepath.Join(c.dir, "n0")).Output()
	if err != nil {
		t.Fatal(err)
	}
	c.join = listen[0] + "/p2p/" + strings.TrimSpace(string(id))
	for i := 0; i < n; i++ {
		p := &proc{name: fmt.Sprintf("n%d", i), dataDir: filepath.Join(c.dir, fmt.Sprintf("n%d", i)), listen: listen[i], api: api[i]}
		p.args = []string{"node", "--data-dir", p.dataDir, "--secret-file", filepath.Join(c.dir, "n0", "secret"), "--no-mdns",
			"--listen", p.listen, "--api", p.api, "--models", c.models, "--memory", memory, "--parallel", "1"}
		p.args = append(p.args, extra...)
		if each != nil {
			p.args = append(p.args, each(i)...)
		}
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
	for _, p := range c.nodes { // every node asked later must see all n
		c.waitMembers(p, n)
	}
	return c
}

// localAddrs gives n nodes a libp2p listen address and an API address
// each on loopback, on ports the kernel picked (all held at once, so they
// differ; a port picked at random may be taken). A restarted node keeps
// its ports.
func localAddrs(t *testing.T, n int) (listen, api []string) {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	port := func() int {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		return l.Addr().(*net.TCPAddr).Port
	}
	for range n {
		listen = append(listen, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port()))
		api = append(api, fmt.Sprintf("127.0.0.1:%d", port()))
	}
	return listen, api
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (c *cluster) start(p *proc) {
	c.t.Helper()
	log, err := os.OpenFile(filepath.Join(c.dir, p.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	p.log = log
	bin := c.bin
	if p.bin != "" {
		bin = p.bin
	}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
}

// stop ends a node with SIGINT (a clean stop).
func (c *cluster) stop(p *proc) {
	if p.cmd == nil || p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// kill ends a node with SIGKILL, as a crash or a pulled plug would.
func (c *cluster) kill(p *proc) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// waitMembers waits until node p's view has n members with models.
func (c *cluster) waitMembers(p *proc, n int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, "status", "--api", p.api, "--expect", fmt.Sprint(n), "--timeout", "60s")
	for i, a := range p.args {
		if a == "--api-key" {
			cmd.Env = append(os.Environ(), "STRATA_API_KEY="+p.args[i+1])
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("status --expect %d: %v\n%s", n, err, out)
	}
}

// runLocal is the oracle: `strata run` on one node, in one process.
func runLocal(t *testing.T, bin, model, prompt string, n int) string {
	t.Helper()
	out, err := exec.Command(bin, "run", "--model", model, "--prompt", prompt, "--max-tokens", fmt.Sprint(n)).Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return string(out)
}

func runViaAPI(t *testing.T, bin, apiAddr, model, prompt string, n int) string {
	t.Helper()
	cmd := exec.Command(bin, "run", "--api", apiAddr, "--model", model, "--prompt", prompt, "--max-tokens", fmt.Sprint(n))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run --api: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// clusterStatus reads GET /api/cluster.
func clusterStatusOf(t *testing.T, apiAddr string) api.ClusterStatus {
	t.Helper()
	var st api.ClusterStatus
	if err := getJSON("http://"+apiAddr+"/api/cluster", &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestE2EClusterMatchesOneNode(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	wants := map[string]string{}
	for _, prompt := range []string{"", "Tim and Sue found a box."} {
		wants[prompt] = runLocal(t, bin, stories, prompt, 150)
	}
	for _, tc := range []struct {
		nodes  int
		memory string
	}{{2, "1100kB"}, {3, "800kB"}, {5, "450kB"}} {
		t.Run(fmt.Sprintf("stories260K-%d-processes", tc.nodes), func(t *testing.T) {
			c := newCluster(t, bin, map[string]string{"stories260K": stories}, tc.nodes, tc.memory, "--context", "512")
			last := c.nodes[tc.nodes-1]
			for prompt, want := range wants {
				got := runViaAPI(t, bin, last.api, "stories260K", prompt, 150)
				if got != want {
					t.Errorf("prompt %q:\n got %q\nwant %q", prompt, got, want)
				}
			}
			st := clusterStatusOf(t, last.api)
			holders := 0
			for _, m := range st.Members {
				if len(m.Shards) > 0 {
					holders++
				}
			}
			if holders != tc.nodes {
				t.Errorf("%d nodes hold shards, want %d: %+v", holders, tc.nodes, st.Members)
			}
			// The origin's metrics saw the ring: bytes to each peer, hops, steps.
			resp, err := http.Get("http://" + last.api + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, name := range []string{"strata_peer_sent_bytes_total{", "strata_hop_latency_seconds_count{", "strata_ring_step_seconds_count"} {
				if !strings.Contains(string(metrics), name) {
					t.Errorf("/metrics lacks %s", name)
				}
			}
			// strata plan against the live cluster shows the same ring.
			out, err := exec.Command(bin, "plan", "--api", last.api, "--model", stories, "--context", "512").CombinedOutput()
			if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d stage(s)", tc.nodes)) {
				t.Errorf("plan --api: %v\n%s", err, out)
			}
		})
	}
	t.Run("tinyllama-1.1b-3-processes", func(t *testing.T) {
		model := tinyllama(t, bin)
		c := newCluster(t, bin, map[string]string{"tinyllama": model}, 3, "450MB", "--context", "256")
		want := runLocal(t, bin, model, "hello world", 24)
		start := time.Now()
		got := runViaAPI(t, bin, c.nodes[1].api, "tinyllama", "hello world", 24)
		t.Logf("3 processes: 24 tokens of tinyllama-1.1b Q8_0 in %v (including shard loads)", time.Since(start))
		if got != want {
			t.Errorf("tinyllama across 3 processes:\n got %q\nwant %q", got, want)
		}
	})
}

// The official OpenAI Node client streams a chat completion from a
// three-process cluster (API key required), and the text is what one node
// generates for the same prompt.
func TestE2EOpenAIClientOnCluster(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	node, modules := nodeClient(t, "openai")
	c := newCluster(t, bin, map[string]string{"stories260K": stories}, 3, "800kB", "--context", "512", "--api-key", "cluster-key")
	want := strings.TrimSuffix(runLocal(t, bin, stories, "Once upon a time", 40), "\n")
	script := filepath.Join(t.TempDir(), "stream.cjs")
	os.WriteFile(script, []byte(`
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: process.env.BASE_URL + "/v1", apiKey: "cluster-key", maxRetries: 0 });
(async () => {
  let text = "", chunks = 0, finish = "";
  const stream = await client.chat.completions.create({ model: "stories260K", stream: true, temperature: 0, max_tokens: 40,
    messages: [{ role: "user", content: "Once upon a time" }] });
  for await (const part of stream) {
    const choice = part.choices[0];
    if (choice && choice.delta && choice.delta.content) { text += choice.delta.content; chunks++; }
    if (choice && choice.finish_reason) finish = choice.finish_reason;
  }
  console.log(JSON.stringify({ text, chunks, finish }));
})().catch((e) => { console.error(e); process.exit(1); });
`), 0o644)
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BASE_URL=http://"+c.nodes[2].api)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	var got struct {
		Text, Finish string
		Chunks       int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Text != want || got.Chunks < 10 || got.Finish != "length" {
		t.Errorf("streamed %q in %d chunks (%s); want %q", got.Text, got.Chunks, got.Finish, want)
	}
}

// The official Anthropic SDK streams a message from a three-process
// cluster (POST /v1/messages, key as x-api-key) and gets the one-node text.
func TestE2EAnthropicClientOnCluster(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	node, modules := nodeClient(t, "@anthropic-ai/sdk")
	c := newCluster(t, bin, map[string]string{"stories260K": stories}, 3, "800kB", "--context", "512", "--api-key", "cluster-key")
	want := strings.TrimSuffix(runLocal(t, bin, stories, "Once upon a time", 40), "\n")
	script := filepath.Join(t.TempDir(), "stream.cjs")
	os.WriteFile(script, []byte(`
const Anthropic = require("@anthropic-ai/sdk");
const client = new Anthropic({ baseURL: process.env.BASE_URL, apiKey: "cluster-key", maxRetries: 0 });
(async () => {
  let text = "", deltas = 0, stop = "", events = [];
  const stream = await client.messages.create({ model: "stories260K", stream: true, temperature: 0, max_tokens: 40,
    messages: [{ role: "user", content: "Once upon a time" }] });
  for await (const ev of stream) {
    if (events[events.length - 1] !== ev.type) events.push(ev.type);
    if (ev.type === "content_block_delta") { text += ev.delta.text; deltas++; }
    if (ev.type === "message_delta") stop = ev.delta.stop_reason;
  }
  console.log(JSON.stringify({ text, deltas, stop, events }));
})().catch((e) => { console.error(e); process.exit(1); });
`), 0o644)
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BASE_URL=http://"+c.nodes[2].api, "ANTHROPIC_BASE_URL=", "ANTHROPIC_API_KEY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	var got struct {
		Text, Stop string
		Deltas     int
		Events     []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Text != want || got.Deltas < 10 || got.Stop != "max_tokens" ||
		strings.Join(got.Events, " ") != "message_start content_block_start content_block_delta content_block_stop message_delta message_stop" {
		t.Errorf("streamed %q in %d deltas (%s, events %v); want %q", got.Text, got.Deltas, got.Stop, got.Events, want)
	}
}

// nodeClient finds node and the .ci/npm node_modules holding pkg (make deps
// installs it); STRATA_NODE_MODULES overrides the folder.
func nodeClient(t *testing.T, pkg string) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (make deps installs Node.js for this test)")
	}
	modules = os.Getenv("STRATA_NODE_MODULES")
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join("..", "..", ".ci", "npm", "node_modules"))
	}
	if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
		t.Fatalf("the %s npm package is missing from %s (make deps installs it)", pkg, modules)
	}
	return node, modules
}

// Overload: 64 concurrent streaming chat completions sent to one node of
// a three-process cluster that runs 4 at once and lets 32 wait. Each is
// answered with the one-node text or refused at once with 429 and
// Retry-After; none is lost; at least the 36 that fit are answered, the
// waiters say where they stood in line; and no node holds more memory
// than it offers (sampled while they run).
func TestE2EOverloadAnsweredOrRefused(t *testing.T) {
	const requests, parallel, queue = 64, 4, 32
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	c := newCluster(t, bin, map[string]string{"stories260K": stories}, 3, "1100kB", "--context", "256",
		"--parallel", strconv.Itoa(parallel), "--queue", strconv.Itoa(queue))
	want := strings.TrimSuffix(runLocal(t, bin, stories, "Once upon a time", 30), "\n")
	body := `{"model": "stories260K", "stream": true, "temperature": 0, "max_tokens": 30, "messages": [{"role": "user", "content": "Once upon a time"}]}`
	type result struct {
		text   string
		status int
		retry  string
		place  int
		err    error
	}
	// Memory held against memory offered, on every node, while they run.
	stop := make(chan struct{})
	overBudget := make(chan string, 1)
	var sampled atomic.Int64 // samples that carried both figures
	go func() {
		for {
			select {
			case <-stop:
				close(overBudget)
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, n := range c.nodes {
				m, err := scrapeMetrics(n.api)
				if err == nil && m["strata_memory_offered_bytes"] > 0 && m["strata_memory_used_bytes"] > 0 {
					sampled.Add(1)
				}
				if err == nil && m["strata_memory_used_bytes"] > m["strata_memory_offered_bytes"] {
					overBudget <- fmt.Sprintf("node %s holds %.0f bytes of the %.0f it offers", n.api, m["strata_memory_used_bytes"], m["strata_memory_offered_bytes"])
					<-stop
					close(overBudget)
					return
				}
			}
		}
	}()
	results := make(chan result, requests)
	for range requests {
		go func() {
			resp, err := http.Post("http://"+c.nodes[1].api+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			r := result{status: resp.StatusCode, retry: resp.Header.Get("Retry-After")}
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				r.text = string(b)
				results <- r
				return
			}
			r.place, r.err = strconv.Atoi(resp.Header.Get("X-Strata-Queue-Position"))
			var text strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				var chunk struct {
					Choices []struct {
						Delta struct{ Content string }
					}
				}
				if err := json.Unmarshal([]byte(line), &chunk); err != nil {
					r.err = err
					break
				}
				for _, ch := range chunk.Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			r.text = text.String()
			if r.err == nil {
				r.err = sc.Err()
			}
			results <- r
		}()
	}
	answered, refused, lastPlace := 0, 0, 0
	for range requests {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("lost: %v (status %d, %q)", r.err, r.status, r.text)
		case r.status == http.StatusOK && r.text == want:
			answered++
			lastPlace = max(lastPlace, r.place)
		case (r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable) && r.retry != "":
			refused++
		default:
			t.Errorf("status %d (Retry-After %q): %q; want the one-node text %q or 429/503 with Retry-After", r.status, r.retry, r.text, want)
		}
	}
	close(stop)
	if msg, ok := <-overBudget; ok {
		t.Error(msg)
	}
	if sampled.Load() == 0 {
		t.Error("no sample of strata_memory_used_bytes and strata_memory_offered_bytes: the memory check saw nothing")
	}
	t.Logf("%d answered (the last admitted had waited at place %d in line), %d refused", answered, lastPlace, refused)
	if answered < parallel+queue || answered+refused != requests {
		t.Errorf("%d answered and %d refused of %d; want at least %d answered, the rest refused", answered, refused, requests, parallel+queue)
	}
	if lastPlace < 1 || lastPlace > queue {
		t.Errorf("the deepest place in line an answered request reports is %d; want 1..%d", lastPlace, queue)
	}
	// The shards ran the sessions' steps in batches (continuous batching).
	var passes, steps float64
	for _, n := range c.nodes {
		m, err := scrapeMetrics(n.api)
		if err != nil {
			t.Fatal(err)
		}
		passes += m["strata_batch_sessions_count"]
		steps += m["strata_batch_sessions_sum"]
	}
	t.Logf("the shards ran %.0f forward passes carrying %.0f sessions' steps", passes, steps)
	if passes == 0 || steps <= passes {
		t.Errorf("%.0f forward passes carried %.0f steps: no batch of several sessions", passes, steps)
	}
}

// A node killed with SIGKILL mid-answer costs a pause, not the answer; it
// comes back and is used again.
func TestE2ENodeKilledMidAnswer(t *testing.T) {
	bin := buildBinary(t)
	model := tinyllama(t, bin)
	// Four nodes of 450 MB: the model (1.2 GB) needs three; three survivors still fit it.
	c := newCluster(t, bin, map[string]string{"tinyllama": model}, 4, "450MB", "--context", "256")
	const n = 60
	want := runLocal(t, bin, model, "the cluster", n)

	origin := c.nodes[3]
	var victim *proc
	var killedAt, last time.Time
	var worstGap, normalGap time.Duration
	tokens := 0
	var got strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := api.StreamGenerate(ctx, "http://"+origin.api, "", api.GenerateRequest{Model: "tinyllama", Prompt: "the cluster", MaxTokens: n}, func(text string) error {
		got.WriteString(text)
		tokens++
		now := time.Now()
		if !last.IsZero() {
			if gap := now.Sub(last); killedAt.IsZero() {
				normalGap = max(normalGap, gap)
			} else {
				worstGap = max(worstGap, gap)
			}
		}
		last = now
		switch tokens {
		case 15:
			// Kill a node that holds a stage and is not the origin.
			victim = c.stageNode(origin)
			killedAt = time.Now()
			c.kill(victim)
			last = time.Now()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.String()+"\n" != want {
		t.Fatalf("after killing %s:\n got %q\nwant %q", victim.name, got.String()+"\n", want)
	}
	t.Logf("longest gap between tokens after SIGKILL of %s: %v (before: %v)", victim.name, worstGap, normalGap)

	// The killed node restarts with the same identity, rejoins, and a new
	// plan (the same as the first: it was in it) uses it again.
	c.start(victim)
	c.waitMembers(origin, 4)
	if out := runViaAPI(t, bin, origin.api, "tinyllama", "the cluster", 8); !strings.HasPrefix(want, strings.TrimSuffix(out, "\n")) {
		t.Errorf("after the restart: %q", out)
	}
	id := peerIDOf(t, c.bin, victim)
	deadline := time.Now().Add(10 * time.Second)
	for {
		used := false
		for _, m := range clusterStatusOf(t, origin.api).Members {
			if m.PeerID == id && len(m.Shards) > 0 {
				used = true
			}
		}
		if used {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node %s holds no shard", victim.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stageNode is a node, other than origin, that holds a stage of a
// session origin drives now.
func (c *cluster) stageNode(origin *proc) *proc {
	t := c.t
	for _, s := range clusterStatusOf(t, origin.api).Sessions {
		for _, stg := range s.Stages {
			for _, p := range c.nodes {
				if p != origin && peerIDOf(t, c.bin, p) == stg.PeerID {
					return p
				}
			}
		}
	}
	t.Fatal("no stage on a node other than the origin")
	return nil
}

func peerIDOf(t *testing.T, bin string, p *proc) string {
	out, err := exec.Command(bin, "node", "id", "--data-dir", p.dataDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
