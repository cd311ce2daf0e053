package origin

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/runtime/catalog"
)

// Member is one node of the membership view, as sessions see it.
type Member struct {
	ID          string     // the node's peer ID (the Address of its PIDs)
	Host        *actor.PID // its shard host
	MemoryBytes uint64     // memory it offers (the --memory cap or physical memory)
	Compute     float64    // relative compute rate; 0 = unknown
	// MemBandwidth is the measured rate (bytes/s) at which it reads
	// weights; 0 = unknown. Tensor-parallel slices follow it.
	MemBandwidth float64
	// Links are the round trips it measured to other members, by ID.
	Links    map[string]time.Duration
	Models   []string  // models it holds complete
	LastSeen time.Time // when the node was last heard from (zero: unknown)
	// Partial are the models it holds only some layers of (fetched from
	// peers), by name: Held, Embed and Head are set (Layers and Bytes not).
	Partial map[string]catalog.Holding
	// Fetches says it keeps layers it fetches from peers: a plan may give
	// it layers of a model it lacks.
	Fetches bool
	// Arch is its GOARCH ("" unknown): a speculative check that a stage
	// of another architecture computes stays within the bound that holds
	// on every one.
	Arch string
}

// Directory is the current membership view: the members plans may use
// (a node leaving the cluster is not listed).
type Directory interface {
	Members() []Member
}

// StaticDirectory is a fixed view, for tests and single nodes.
type StaticDirectory []Member

// Members implements Directory.
func (d StaticDirectory) Members() []Member { return d }
