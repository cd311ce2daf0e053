package peers

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// KnownPeersFile, in the data directory, lists the members this node last
// saw (one /…/p2p/ID address per line). A restarted node dials them at
// once, so it is back in the cluster before the others' reconnection
// backoff runs out, even when it had no --join (the first node of a
// cluster) and mDNS is off: the rolling-upgrade case.
const KnownPeersFile = "known-peers"

// Bounds on what is remembered and how long a restarted node tries.
const (
	maxKnownPeers = 64
	rejoinFor     = time.Minute
)

// readKnownPeers reads the file; a missing or damaged one is no peers
// (it only speeds up joining).
func readKnownPeers(dataDir string) []peer.AddrInfo {
	f, err := os.Open(filepath.Join(dataDir, KnownPeersFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	byID := map[peer.ID]*peer.AddrInfo{}
	var order []peer.ID
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(order) < maxKnownPeers {
		ai, err := ParseJoin(strings.TrimSpace(sc.Text()))
		if err != nil {
			continue
		}
		if have, ok := byID[ai.ID]; ok {
			have.Addrs = append(have.Addrs, ai.Addrs...)
			continue
		}
		byID[ai.ID] = &ai
		order = append(order, ai.ID)
	}
	out := make([]peer.AddrInfo, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

// rememberPeers writes the current members' addresses (not this node's)
// to the file, replacing it atomically.
func (n *Node) rememberPeers() {
	if n.cfg.DataDir == "" {
		return
	}
	var lines []string
	for _, m := range n.member.View().Members {
		if m.ID == n.ID() {
			continue
		}
		for _, a := range m.Info.GetAddrs() {
			lines = append(lines, a+"/p2p/"+m.ID.String())
		}
		if len(lines) >= 4*maxKnownPeers {
			break
		}
	}
	slices.Sort(lines)
	path := filepath.Join(n.cfg.DataDir, KnownPeersFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		n.log.Debug("peers: remember members", "err", err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		n.log.Debug("peers: remember members", "err", err)
	}
}

// rejoin dials a remembered member until connected, for at most
// rejoinFor: it may have left the cluster for good.
func (n *Node) rejoin(ai peer.AddrInfo) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, rejoinFor)
	defer cancel()
	var b backoff
	for n.host.Network().Connectedness(ai.ID) != network.Connected {
		dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
		err := n.host.Connect(dctx, ai)
		dcancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		b.failed(time.Now())
		select {
		case <-time.After(time.Until(b.next)):
		case <-ctx.Done():
			return
		}
	}
}
