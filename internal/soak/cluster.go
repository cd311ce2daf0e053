// Package soak runs a cluster of real strata node processes under hours
// of mixed traffic and random faults, and checks invariants while it runs
// and at the end: every request answered (or clearly refused), every
// greedy answer equal to a one-node reference, no session or memory left
// behind, no node spinning while idle (scripts/soak.sh, make soak, and a
// short run in make test).
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// node is one strata node process, restarted as often as faults say.
type node struct {
	name, dataDir, api string
	key                string   // its API key ("" = none: a loopback API)
	prefix             []string // runs the binary (in a network namespace)
	args               []string
	log                *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	started time.Time // of the current process
	done    chan struct{}
	stopped bool // SIGSTOPped now

	kills atomic.Int64 // SIGKILLs so far: a request that sees it change lost its origin
}

// freePort asks the kernel for a TCP port on loopback (a port picked at
// random may be taken).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newNode lays out a node on loopback: its data directory, ports and
// flags.
func newNode(dir, name string, args []string) (*node, error) {
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	return newNodeAt(dir, name, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", peerPort), fmt.Sprintf("127.0.0.1:%d", apiPort), "", nil, args)
}

// newNodeAt lays out a node listening at listen (libp2p) and api, run
// with prefix (nil, or a network namespace's "ip netns exec NS").
func newNodeAt(dir, name, listen, api, key string, prefix, args []string) (*node, error) {
	n := &node{name: name, dataDir: filepath.Join(dir, name), api: api, key: key, prefix: prefix}
	n.args = append([]string{"node", "--data-dir", n.dataDir, "--no-mdns", "--listen", listen, "--api", n.api}, args...)
	if key != "" {
		n.args = append(n.args, "--api-key", key)
	}
	var err error
	if n.log, err = os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *node) peerAddr() string {
	for i, a := range n.args {
		if a == "--listen" {
			return n.args[i+1]
		}
	}
	return ""
}

// start runs the node's process.
func (n *node) start(bin string) error { return n.startWith(bin, n.args) }

// startWith runs the node's process with args instead of its own.
func (n *node) startWith(bin string, args []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	argv := append(slices.Clone(n.prefix), bin)
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintf(n.log, "=== soak: started pid %d at %s\n", cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.cmd, n.done, n.started, n.stopped = cmd, done, time.Now(), false
	return nil
}

// signal sends sig to the current process.
func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(sig)
		n.stopped = sig == syscall.SIGSTOP
	}
}

// leave asks the node to leave (SIGTERM) and waits for it to exit; a
// node that does not within 60 s is killed, and the failure said.
func (n *node) leave() (failure string) {
	n.signal(syscall.SIGTERM)
	if !n.wait(60 * time.Second) {
		failure = fmt.Sprintf("%s did not leave within 60 s of SIGTERM", n.name)
		n.signal(syscall.SIGKILL)
		n.wait(10 * time.Second)
	}
	return failure
}

// wait waits for the current process to exit, up to d; false if it did not.
func (n *node) wait(d time.Duration) bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// kill ends the process for good (the end of the run).
func (n *node) kill() {
	n.signal(syscall.SIGCONT)
	n.signal(syscall.SIGKILL)
	n.wait(10 * time.Second)
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get asks node n for path, with its API key.
func (n *node) get(path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+n.api+path, nil)
	if err != nil {
		return nil, err
	}
	if n.key != "" {
		req.Header.Set("Authorization", "Bearer "+n.key)
	}
	return httpClient.Do(req)
}

func (n *node) getJSON(path string, v any) error {
	resp, err := n.get(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s", n.api, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// members is how many members node n's view holds (0 when it does not
// answer).
func (n *node) members() int {
	var st struct {
		Members []json.RawMessage `json:"members"`
	}
	if err := n.getJSON("/api/peers", &st); err != nil {
		return 0
	}
	return len(st.Members)
}

// metrics reads the unlabelled samples of the node's /metrics.
func (n *node) metrics() (map[string]float64, error) {
	resp, err := n.get("/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = f
		}
	}
	return out, nil
}

// sessions is the sessions node n drives plus those open on its shards.
func (n *node) sessions() (driven, staged int, err error) {
	var st struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if err := n.getJSON("/api/cluster", &st); err != nil {
		return 0, 0, err
	}
	m, err := n.metrics()
	if err != nil {
		return 0, 0, err
	}
	return len(st.Sessions), int(m["strata_stage_sessions"]), nil
}

// waitAll waits until every node in ns answers with want members, or ctx
// ends; it returns how long that took.
func waitAll(ctx context.Context, ns []*node, want int) (time.Duration, error) {
	start := time.Now()
	for {
		ok := true
		for _, n := range ns {
			if n.members() != want {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
