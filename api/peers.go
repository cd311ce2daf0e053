package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PeersStatus is the body of GET /api/peers: one node's membership view,
// as `strata status` prints it.
type PeersStatus struct {
	// Self is the answering node's peer ID.
	Self string `json:"self"`
	// ViewVersion grows with every change to the view (local to Self).
	ViewVersion uint64       `json:"view_version"`
	Members     []PeerStatus `json:"members"`
}

// PeerStatus is one member as it last described itself.
type PeerStatus struct {
	PeerID  string   `json:"peer_id"`
	Addrs   []string `json:"addrs"`
	Version string   `json:"version"`
	// MemoryBytes is the memory the node offers (physical, or its --memory
	// cap); MemoryAvailableBytes is what is free of it.
	MemoryBytes          uint64  `json:"memory_bytes"`
	MemoryAvailableBytes uint64  `json:"memory_available_bytes"`
	ComputeFlops         float64 `json:"compute_flops"`
	// MemoryBandwidth is the node's measured memory read rate, bytes/s
	// (0: not measured).
	MemoryBandwidth float64 `json:"memory_bandwidth"`
	// Device is the compute device beside the CPU its shards use
	// (strata node --gpu), "NAME (KIND)"; empty: the CPU only.
	Device string      `json:"device,omitempty"`
	Models []PeerModel `json:"models"`
	Shards []string    `json:"shards"`
	// LastSeenMS is how long ago, in milliseconds, its last heartbeat came.
	LastSeenMS int64 `json:"last_seen_ms"`
	// Links are the node's links to the peers it sends activations to: the
	// answering node's own as they are now, every other member's as it
	// last announced them.
	Links []LinkStatus `json:"links,omitempty"`
	// Fetching are the models whose layers it is fetching from peers.
	Fetching []FetchStatus `json:"fetching,omitempty"`
}

// LinkStatus is one link from a node to a peer: the transport that
// carries activations now ("shm", "rdma", or "tcp": the libp2p stream) and
// the round trip measured on it, in microseconds.
type LinkStatus struct {
	PeerID    string `json:"peer_id"`
	Transport string `json:"transport"`
	RTTMicros int64  `json:"rtt_us"`
}

// PeerModel is one GGUF file a member holds.
type PeerModel struct {
	Name      string `json:"name"`
	SizeBytes uint64 `json:"size_bytes"`
	Digest    string `json:"digest"`
}

// PeersHandler serves GET /api/peers from a snapshot function.
func PeersHandler(status func() PeersStatus) http.Handler {
	return snapshotHandler(func(*http.Request) any { return status() })
}

// snapshotHandler serves GET requests with the indented JSON of what
// snapshot returns for them (the status endpoints a node adds).
func snapshotHandler(snapshot func(*http.Request) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(snapshot(r))
	})
}

// RequireKey wraps h so that, when key is set, requests must carry
// "Authorization: Bearer KEY" (401 otherwise). For a node's status
// endpoints served without a full Server.
func RequireKey(key string, h http.Handler) http.Handler {
	if key == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(key)) != 1 {
			http.Error(w, "missing or wrong API key (Authorization: Bearer KEY)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// FetchPeers gets GET /api/peers from the node whose API is at base
// ("http://127.0.0.1:7340", or just "127.0.0.1:7340"), sending key when
// set. It returns the body as well, for printing verbatim.
func FetchPeers(ctx context.Context, base, key string) (PeersStatus, []byte, error) {
	var st PeersStatus
	body, err := fetchJSON(ctx, base, "/api/peers", key, &st)
	return st, body, err
}

// fetchJSON gets path from the node whose API is at base and decodes its
// JSON answer into v; it returns the body too.
func fetchJSON(ctx context.Context, base, path, key string, v any) ([]byte, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimRight(base, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return body, nil
}
