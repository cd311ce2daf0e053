package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"strata/peers"
	"strata/peers/allreduce"
	"strata/runtime/model"
)

// libp2pGroup starts n strata nodes on loopback (one cluster secret, no
// mDNS), tells each the others' addresses, and forms one all-reduce group
// of them: the members' partial sums cross the same private-network,
// Noise and yamux layers, and the same protocol, as between hosts. For
// bench tp --transport libp2p; with shm the partial sums go through
// shared-memory rings (--transport shm).
func libp2pGroup(n int, wire allreduce.Wire, shm bool) ([]model.AllReducer, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret := peers.NewSecret()
	var nodes []*peers.Node
	closeAll := func() {
		for _, nd := range nodes {
			nd.Close()
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range n {
		nd, err := peers.New(ctx, peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Secret: secret, Logger: quiet, Transport: peers.TransportTCP})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		nodes = append(nodes, nd)
	}
	ids := make([]peer.ID, n)
	for i, nd := range nodes {
		ids[i] = nd.ID()
		for _, o := range nodes {
			if o != nd {
				nd.Host().Peerstore().AddAddrs(o.ID(), o.Host().Addrs(), peerstore.PermanentAddrTTL)
			}
		}
	}
	id := allreduce.NewGroupID()
	out := make([]model.AllReducer, n)
	errs := make(chan error, n)
	for i, nd := range nodes {
		go func() {
			g, err := nd.AllReduce().Join(ctx, id, ids, allreduce.Options{Wire: wire, Shm: shm})
			out[i] = g
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("all-reduce group: %w", err)
		}
	}
	return out, closeAll, nil
}
