package api

import (
	"encoding/json"
	"net/http"
)

// ClusterStatus is the body of GET /api/cluster: where things are.
type ClusterStatus struct {
	Self     string          `json:"self"`
	Members  []MemberStatus  `json:"members"`
	Sessions []SessionStatus `json:"sessions"`
}

// MemberStatus is one node of the view.
type MemberStatus struct {
	PeerID      string        `json:"peer_id"`
	Addrs       []string      `json:"addrs,omitempty"`
	MemoryBytes uint64        `json:"memory_bytes"`
	Device      string        `json:"device,omitempty"` // see PeerStatus.Device
	Models      []string      `json:"models,omitempty"`
	Shards      []ShardStatus `json:"shards"`
	// Links: the answering node's own links, the others' as announced
	// (see PeerStatus.Links).
	Links []LinkStatus `json:"links,omitempty"`
	// Fetching are the models whose layers it is fetching from peers.
	Fetching []FetchStatus `json:"fetching,omitempty"`
}

// FetchStatus is one model's fetch of layers from peers in flight.
type FetchStatus struct {
	Model      string `json:"model"`
	DoneBytes  uint64 `json:"done_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
}

// ShardStatus is one loaded shard: layers [Layers[0], Layers[1]).
type ShardStatus struct {
	Model  string `json:"model"`
	Layers [2]int `json:"layers"`
	// TP is "I/N" for member I of a tensor-parallel group of N.
	TP string `json:"tp,omitempty"`
}

// SessionStatus is one session driven by the answering node.
type SessionStatus struct {
	ID        string        `json:"id"`
	Model     string        `json:"model"`
	Prompt    int           `json:"prompt_tokens"`
	Generated int           `json:"generated_tokens"`
	Stages    []StageStatus `json:"stages"`
}

// StageStatus is one stage of a session's ring.
type StageStatus struct {
	PeerID string `json:"peer_id"`
	Layers [2]int `json:"layers"`
	// TP lists the members of a tensor-parallel stage (peer_id leads).
	TP []string `json:"tp,omitempty"`
}

// ClusterHandler serves GET /api/cluster from a snapshot function.
func ClusterHandler(status func() ClusterStatus) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(status())
	})
}
