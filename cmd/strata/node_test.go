package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/api"
	"strata/peers"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	peersLine  = regexp.MustCompile(`peers:  (\S+)`)
	statusLine = regexp.MustCompile(`status: http://(\S+)/api/peers`)
)

// startNode runs `strata node` in the background until the test ends and
// returns its peer multiaddr and API address, read from what it prints.
func startNode(t *testing.T, f nodeFlags) (peerAddr, apiAddr string) {
	t.Helper()
	peerAddr, apiAddr, _, _ = startNodeOutput(t, f)
	return peerAddr, apiAddr
}

// startNodeOutput is startNode that also returns what the node prints
// (out) and logs.
func startNodeOutput(t *testing.T, f nodeFlags) (peerAddr, apiAddr string, out, logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, logs = new(syncBuffer), new(syncBuffer)
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, out, logs, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
		if t.Failed() {
			t.Logf("node output:\n%s%s", out.String(), logs.String())
		}
	})
	deadline := time.After(20 * time.Second)
	for {
		// The join hint is the last line a starting node prints: tests that
		// read the output right after would race with the lines after status.
		if m := statusLine.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "--join ") {
			return peersLine.FindStringSubmatch(out.String())[1], m[1], out, logs
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("node exited: %v\n%s%s", err, out.String(), logs.String())
		case <-deadline:
			t.Fatalf("node did not start:\n%s%s", out.String(), logs.String())
		case <-time.After(10 * time.Millisecond): // the node prints once it is up
		}
	}
}

func TestNodeAndStatus(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	os.MkdirAll(models, 0o755)
	os.WriteFile(filepath.Join(models, "stories.gguf"), []byte("not really a model"), 0o644)
	base := func(name string) nodeFlags {
		return nodeFlags{
			dataDir: filepath.Join(dir, name), listen: []string{"/ip4/127.0.0.1/tcp/0"}, apiAddr: "127.0.0.1:0",
			noMDNS: true, secretFile: filepath.Join(dir, "a", peers.SecretFile),
		}
	}
	// The first node creates the cluster secret (strata node id does it
	// too, for scripts); the others read it.
	if out, err := run(t, "node", "id", "--data-dir", filepath.Join(dir, "a")); err != nil || !strings.HasPrefix(out, "12D3Koo") {
		t.Fatalf("node id: %q %v", out, err)
	}
	a := base("a")
	a.secretFile, a.models, a.memory = "", models, "2GiB"
	aPeer, aAPI := startNode(t, a)
	b := base("b")
	b.join = []string{aPeer}
	startNode(t, b)
	c := base("c")
	c.join = []string{aPeer}
	_, cAPI := startNode(t, c)

	out, err := run(t, "status", "--api", aAPI, "--json", "--expect", "3", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	var st api.PeersStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err, out)
	}
	// The JSON the issue asks for: members with peer_id, addrs, memory_bytes, models.
	var raw struct {
		Members []map[string]any `json:"members"`
	}
	json.Unmarshal([]byte(out), &raw)
	for _, m := range raw.Members {
		for _, k := range []string{"peer_id", "addrs", "memory_bytes", "models"} {
			if _, ok := m[k]; !ok {
				t.Errorf("member lacks %q: %v", k, m)
			}
		}
	}
	if len(st.Members) != 3 {
		t.Fatalf("%d members: %s", len(st.Members), out)
	}
	self := st.Members[0]
	for _, m := range st.Members {
		if m.PeerID == st.Self {
			self = m
		}
		// Every node measures and announces its memory bandwidth (the
		// cost model's input): plausible for any machine, 0.1 to 10^4 GB/s.
		if !(m.MemoryBandwidth > 1e8 && m.MemoryBandwidth < 1e13) {
			t.Errorf("member %s announces a memory bandwidth of %g B/s", m.PeerID, m.MemoryBandwidth)
		}
	}
	if self.MemoryBytes != 2<<30 || len(self.Models) != 1 || self.Models[0].Name != "stories" || !strings.HasPrefix(self.Models[0].Digest, "sha256-fl:") {
		t.Errorf("node a: %+v", self)
	}

	// The table, from another node.
	out, err = run(t, "status", "--api", "http://"+cAPI, "--expect", "3", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	members, _, _ := strings.Cut(out, "links from") // the table of members, without the links below it
	if !strings.Contains(out, "3 members") || strings.Count(members, "12D3Koo") != 4 || !strings.Contains(out, "stories") || !strings.Contains(out, "2.1 GB") {
		t.Errorf("status table:\n%s", out)
	}
}

func TestNodeErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed join", []string{"--join", "127.0.0.1:7341"}, `--join "127.0.0.1:7341": malformed multiaddr`},
		{"malformed listen", []string{"--listen", "/ip4/1.2.3/tcp/1"}, `--listen "/ip4/1.2.3/tcp/1": malformed multiaddr`},
		{"join without peer ID", []string{"--join", "/ip4/127.0.0.1/tcp/7341"}, "needs the peer ID"},
		{"missing secret file", []string{"--secret-file", filepath.Join(dir, "nope")}, "--secret-file: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"secret file is a directory", []string{"--secret-file", dir}, "is a directory"},
		{"short secret", []string{"--secret", "hunter2"}, "too short"},
		{"bad memory", []string{"--memory", "lots"}, "--memory: invalid size"},
		{"public API without key", []string{"--api", "0.0.0.0:0"}, "not a loopback address"},
		{"step timeout too short", []string{"--step-timeout", "1ms"}, "--step-timeout 1ms: at least 100ms"},
		{"bad step timeout", []string{"--step-timeout", "soon"}, "invalid argument \"soon\" for \"--step-timeout\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"node", "--data-dir", filepath.Join(dir, "d"), "--no-mdns", "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0"}, tc.args...)
			_, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.want)
			}
		})
	}
	t.Run("ports in use", func(t *testing.T) {
		peerAddr, apiAddr := startNode(t, nodeFlags{dataDir: filepath.Join(dir, "a"), listen: []string{"/ip4/127.0.0.1/tcp/0"}, apiAddr: "127.0.0.1:0", noMDNS: true})
		listen := strings.Split(peerAddr, "/p2p/")[0]
		_, err := run(t, "node", "--data-dir", filepath.Join(dir, "b"), "--no-mdns", "--listen", listen, "--api", "127.0.0.1:0")
		if err == nil || err.Error() != "--listen "+listen+": address already in use" {
			t.Errorf("peer port in use: %v", err)
		}
		_, err = run(t, "node", "--data-dir", filepath.Join(dir, "b"), "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0", "--api", apiAddr)
		if err == nil || err.Error() != "--api "+apiAddr+": bind: address already in use" {
			t.Errorf("API port in use: %v", err)
		}
	})
	if _, err := run(t, "status", "--api", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no strata node answers at 127.0.0.1:1") {
		t.Errorf("status without a node: %v", err)
	}
}

// The join command a new node prints names the secret's file, never the
// secret (command lines are visible to every user and kept in histories);
// a secret file others can read is warned about.
func TestNodeSecretNotPrinted(t *testing.T) {
	dir := t.TempDir()
	f := nodeFlags{dataDir: filepath.Join(dir, "a"), listen: []string{"/ip4/127.0.0.1/tcp/0"}, apiAddr: "127.0.0.1:0", noMDNS: true}
	_, _, out, logs := startNodeOutput(t, f)
	secretPath := filepath.Join(dir, "a", peers.SecretFile)
	secret, err := peers.ReadSecretFile(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), string(secret)) || !strings.Contains(out.String(), "--secret-file") {
		t.Fatalf("join hint:\n%s", out.String())
	}
	if strings.Contains(logs.String(), "not private") {
		t.Fatalf("warned about a private secret:\n%s", logs.String())
	}
	if err := os.Chmod(secretPath, 0o644); err != nil {
		t.Fatal(err)
	}
	g := f
	g.dataDir, g.secretFile = filepath.Join(dir, "b"), secretPath
	_, _, _, logs = startNodeOutput(t, g)
	if !strings.Contains(logs.String(), "the cluster secret is not private: "+secretPath+" has mode 0644") {
		t.Fatalf("no warning for a secret file others can read:\n%s", logs.String())
	}
}
