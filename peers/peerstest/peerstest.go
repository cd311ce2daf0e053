// Package peerstest starts clusters of strata nodes inside one process, on
// loopback, for tests and benchmarks (like net/http/httptest for servers).
//
// New(t, 3) starts three nodes, joined, with their views converged;
// c.Nodes[0].PID(c.Nodes[1].ID(), peers.PingActor) then names the ping
// actor of the second as the first sees it.
//
// Every node listens on 127.0.0.1 on a free TCP port, shares a fresh random
// cluster secret, has mDNS off, and joins the first live node; WithConfig
// changes any of that. The cluster is closed by t.Cleanup, and the nodes'
// logs are printed if the test failed.
package peerstest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/peers"
)

// ConvergeTimeout bounds how long New waits for the views to converge; it
// is a failure bound, not a delay.
const ConvergeTimeout = 20 * time.Second

// Cluster is a set of in-process nodes.
type Cluster struct {
	// Nodes are the nodes in start order; a killed node stays in the
	// slice (closed).
	Nodes  []*peers.Node
	Secret []byte

	t      testing.TB
	base   peers.Config
	mu     sync.Mutex
	killed map[int]bool
	// forNode are the ForNode options.
	forNode []func(int, *peers.Config)
	logs    []*bytes.Buffer
	logMu   []*sync.Mutex
}

// Option changes the configuration of the nodes of a cluster (setting
// Secret to nil makes an open network).
type Option struct {
	all  func(*peers.Config)
	node func(int, *peers.Config)
}

// WithConfig applies f to each node's configuration before it starts.
func WithConfig(f func(*peers.Config)) Option { return Option{all: f} }

// ForNode applies f to node i's configuration (i in start order) before
// it starts, after the WithConfig options.
func ForNode(f func(i int, cfg *peers.Config)) Option { return Option{node: f} }

// New starts n nodes and waits until every node's view holds all n.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := Start(t, n, opts...)
	if err := c.WaitConverged(ConvergeTimeout); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts n nodes without waiting for their views to converge.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, killed: make(map[int]bool)}
	c.base = peers.Config{
		Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		NoMDNS: true,
		Secret: peers.NewSecret(),
	}
	for _, o := range opts {
		if o.all != nil {
			o.all(&c.base)
		}
		if o.node != nil {
			c.forNode = append(c.forNode, o.node)
		}
	}
	c.Secret = c.base.Secret
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for i := range c.Nodes {
				t.Logf("node %d (%s) log:\n%s", i, c.Nodes[i].ID(), c.Log(i))
			}
		}
	})
	for range n {
		c.Add()
	}
	return c
}

// Add starts one more node, joined to the first live node.
func (c *Cluster) Add() *peers.Node {
	c.t.Helper()
	cfg := c.base
	cfg.Listen = slices.Clone(cfg.Listen)
	var buf bytes.Buffer
	var mu sync.Mutex
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c.mu.Lock()
	for _, f := range c.forNode {
		f(len(c.Nodes), &cfg)
	}
	for i, nd := range c.Nodes {
		if !c.killed[i] {
			cfg.Join = []string{nd.Addrs()[0].String()}
			break
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nd, err := peers.New(ctx, cfg)
	if err != nil {
		c.t.Fatalf("peerstest: start node %d: %v", len(c.Nodes), err)
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, nd)
	c.logs = append(c.logs, &buf)
	c.logMu = append(c.logMu, &mu)
	c.mu.Unlock()
	return nd
}

// Log returns what node i has logged so far.
func (c *Cluster) Log(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logMu[i].Lock()
	defer c.logMu[i].Unlock()
	return c.logs[i].String()
}

// Kill closes node i, as if its process died (its peers see the
// connections close).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	already := c.killed[i]
	c.killed[i] = true
	c.mu.Unlock()
	if !already {
		c.Nodes[i].Close()
	}
}

// Live returns the nodes not killed.
func (c *Cluster) Live() []*peers.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*peers.Node
	for i, nd := range c.Nodes {
		if !c.killed[i] {
			out = append(out, nd)
		}
	}
	return out
}

// WaitConverged waits until every live node's view lists exactly the live
// nodes and every live node has a connection to every other (the full mesh
// the nodes build by dialing the members they hear of), or returns an
// error after timeout saying what is missing.
func (c *Cluster) WaitConverged(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	live := c.Live()
	want := make([]peer.ID, len(live))
	for i, nd := range live {
		want[i] = nd.ID()
	}
	slices.SortFunc(want, func(a, b peer.ID) int { return cmpString(a.String(), b.String()) })
	for _, nd := range live {
		if _, err := nd.Membership().Wait(ctx, func(v peers.View) bool { return slices.Equal(v.IDs(), want) }); err != nil {
			return fmt.Errorf("peerstest: node %s sees %v, want %v: %w", nd.ID(), nd.Membership().View().IDs(), want, err)
		}
	}
	// Connections have no event to wait on: poll, bounded by the timeout.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, a := range live {
		for _, b := range live {
			for a != b && a.Host().Network().Connectedness(b.ID()) != network.Connected {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return fmt.Errorf("peerstest: node %s is not connected to %s: %w", a.ID(), b.ID(), ctx.Err())
				}
			}
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Close closes every node.
func (c *Cluster) Close() {
	for i := range c.Nodes {
		c.Kill(i)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
