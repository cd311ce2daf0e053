package stage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/wire"
	"strata/actors/plan"
	"strata/internal/units"
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/modelinfo"
	"strata/runtime/tensor"
)

// HostName is the actor name of every node's shard host.
const HostName = "shards"

// Acceleration is a shard's device (HostConfig.Accelerate): the
// accelerator (nil: the CPU), what releases it when the shard stops, and
// the bytes of the node's memory the device's scratch takes.
type Acceleration struct {
	Acc     model.Accelerator
	Release func()
	Bytes   uint64
}

// HostConfig configures a Host. Zero values pick the defaults noted.
type HostConfig struct {
	Models catalog.Finder
	// Pool runs the kernels of every shard on the node; nil = a pool of
	// GOMAXPROCS threads of the host's own, closed when the host stops.
	Pool *tensor.Pool
	// MemoryBytes caps the weights + KV caches the node holds; 0 = no cap.
	MemoryBytes uint64
	// DeviceBytes caps the memory the shards' devices take for their
	// scratch (Accelerate), beside MemoryBytes: a device that shares the
	// host's memory allocates the node's. 0 = no cap.
	DeviceBytes uint64
	// Name labels this node in errors ("node 12D3Koo…: ...").
	Name string
	// MaxContext caps the KV positions one session may reserve on a shard
	// (a peer asking for more is refused); 0 = the model's context length.
	MaxContext int
	// SenderMiddleware wraps every message the host and its shards send
	// (activations to the next stage, tokens, answers); nil = none. An
	// in-process cluster shapes and cuts its links with it.
	SenderMiddleware []actor.SenderMiddleware
	// KVType is the element type of the shards' KV caches (the zero value
	// is f16, the default). Every node of a cluster should use the same:
	// the cache's rounding is part of the model's output.
	KVType model.KVType
	// Groups forms the all-reduce groups of the tensor-parallel stages
	// this node is a member of; nil = it refuses tensor-parallel shards.
	Groups Groups
	// NodeAddress maps a node ID to the Address of its actors' PIDs, so
	// that the group PIDs of a tensor-parallel LoadShard are checked
	// against the members the spec names (a peer cannot have a leader
	// relay a session's steps to another node); nil = not checked (an
	// in-process cluster, whose nodes share one address).
	NodeAddress func(node string) string
	// Machines counts the members among nodes (distinct Addresses of
	// their actors' PIDs) that compute on this machine, sharing its
	// cores, and those elsewhere; an address of no member counts in
	// neither (a pipeline's first stage keeps no more of its groups in
	// flight than the stages can compute at once: evenout.go). nil: every
	// node is here (an in-process cluster).
	Machines func(nodes []string) (here, elsewhere int)
	// Accelerate, when set, puts a shard's matrix products on another
	// device (strata node --gpu): it returns the accelerator, what
	// releases it when the shard stops and the memory the device's
	// scratch takes, or no accelerator for the CPU (its reason in the
	// error, which does not fail the load); rows is the most rows a
	// forward pass of the shard carries, free what is left of DeviceBytes
	// (the most a uint64 holds without a cap): a device whose scratch is
	// over it is released, and the shard stays on the CPU.
	// Tensor-parallel members stay on the CPU.
	Accelerate func(m *model.Model, rows int, free uint64) (Acceleration, error)
	// UnloadAfter unloads a shard no session has used for that long (its
	// weights' mapping, scratch and retained prompt caches go; a plan that
	// asks for it again loads it again), as Ollama's keep_alive does; 0 =
	// shards stay until memory is short or the node leaves.
	UnloadAfter time.Duration
	// OnShards, when set, hears the shard list (ShardList) after every
	// load or unload: the node announces it in its NodeInfo.
	OnShards func(shards []string)
	// OnBatch, when set, hears every forward pass a shard runs on the
	// batching path: the sessions' steps it carried and the rows (token
	// positions) they filled. Called on the shard's goroutine: keep it
	// cheap (a histogram's Observe).
	OnBatch func(steps, rows int)
}

// Host loads shards on request and keeps them: one per (model, layer
// range), shared by every session that uses it.
type Host struct {
	cfg     HostConfig
	ownPool *tensor.Pool // the pool NewHost made (nil: the caller's)

	// stop ends fetches in flight when the host stops.
	stop   context.Context
	cancel context.CancelFunc
	// goneMembers are the tensor-parallel member actors (address/id) that
	// a leader relayed to and that stopped (under mu).
	goneMembers map[string]bool
	// fetching counts the fetch goroutines running (at most maxFetches):
	// a LoadShard is anyone's with the secret, and each fetch holds a
	// goroutine and a model's manifest for up to fetchTimeout.
	fetching atomic.Int32
	// leaving: the node is leaving the cluster (Leave); loads are refused.
	// Touched only by the actor, as ticking (UnloadAfter's ticker runs).
	leaving, ticking bool

	mu     sync.Mutex
	system *actor.ActorSystem
	files  map[string]*gguf.File // open models by name
	// fileKeys says which version of a model's files files holds (path and
	// store version): a partly held model dropped and fetched again is
	// new files, and shards must not read the old ones.
	fileKeys map[string]string
	stale    []*gguf.File // replaced files still mapped by loaded shards
	// infos describes each open file's model, read once (Info).
	infos  map[*gguf.File]*modelinfo.Info
	shards map[string]*shard // by actor name
	used   uint64            // weight + KV bytes held
	// deviceUsed is the shards' devices' scratch (HostConfig.DeviceBytes).
	deviceUsed uint64
	clock      uint64 // counts loads and uses, for least-recently-used eviction
	spawns     uint64 // numbers shard actors, so a reloaded shard never reuses a stopping actor's name
}

// NewHost returns a Host; spawn it with Props under HostName.
func NewHost(cfg HostConfig) *Host {
	var own *tensor.Pool
	if cfg.Pool == nil {
		own = tensor.NewPool(0)
		cfg.Pool = own
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Host{cfg: cfg, ownPool: own, stop: stop, cancel: cancel, files: map[string]*gguf.File{}, fileKeys: map[string]string{}, infos: map[*gguf.File]*modelinfo.Info{}, shards: map[string]*shard{}}
}

// fetchTimeout bounds fetching one shard's layers from peers.
const fetchTimeout = time.Hour

// maxFetches bounds the shards a host fetches at once; a LoadShard past
// it is refused (the origin's plan tries again on its next request).
const maxFetches = 8

// shardFetcher is a catalog.Finder that fetches the ranges a shard needs
// from peers (Weights is one).
type shardFetcher interface {
	catalog.Finder
	Ensure(ctx context.Context, model string, first, end, layers int) (int64, error)
	PathVersion(name string) (string, int, error)
}

// fetched is what a fetch goroutine tells the host: the shard's ranges
// are here (or why not); the host then loads it and answers replyTo.
type fetched struct {
	spec    *messages.ShardSpec
	group   []*messages.PID
	replyTo *actor.PID
	err     error
}

// Leave, sent by the node itself (a Go value: no peer can send it), makes
// the host refuse every later LoadShard with ShardLoaded.leaving and stop
// its shards, so the sessions using them re-plan without this node at
// once (their origins watch the shard actors) and replay. The host
// answers with LeaveDone once it has told them to stop.
type Leave struct{}

// LeaveDone is the host's answer to Leave: Shards were told to stop.
type LeaveDone struct{ Shards int }

// Props returns the actor props of the host.
func (h *Host) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return h }, actor.WithSenderMiddleware(h.cfg.SenderMiddleware...))
}

// Receive implements actor.Actor.
func (h *Host) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.mu.Lock()
		h.system = ctx.ActorSystem()
		h.mu.Unlock()
		if h.cfg.UnloadAfter > 0 && !h.ticking {
			h.ticking = true // once, should the actor restart
			self, sys := ctx.Self(), ctx.ActorSystem()
			go func() {
				tick := time.NewTicker(max(min(h.cfg.UnloadAfter/4, 30*time.Second), 10*time.Millisecond))
				defer tick.Stop()
				for {
					select {
					case <-h.stop.Done():
						return
					case <-tick.C:
						sys.Root.Send(self, unloadTick{})
					}
				}
			}()
		}
	case unloadTick:
		h.unloadIdle(time.Now())
	case Leave:
		h.leaving = true
		h.mu.Lock()
		var pids []*actor.PID
		for _, s := range h.shards {
			pids = append(pids, s.pid)
		}
		h.mu.Unlock()
		for _, pid := range pids {
			ctx.Stop(pid) // after its current message; watchers hear Terminated
		}
		ctx.Respond(LeaveDone{Shards: len(pids)})
	case *messages.LoadShard:
		if h.leaving {
			ctx.Respond(h.leavingAnswer(m.GetShard()))
			return
		}
		spec := m.GetShard()
		// A name is checked before anything is kept under it (a lock, a
		// manifest, a goroutine): names come from any peer.
		if spec != nil && spec.Model != "" {
			if err := catalog.ValidName(spec.Model); err != nil {
				ctx.Respond(&messages.ShardLoaded{Shard: &messages.ShardSpec{}, Error: h.label() + err.Error()})
				return
			}
		}
		if f, ok := h.cfg.Models.(shardFetcher); ok && spec != nil && spec.Model != "" && !h.has(spec) {
			if h.fetching.Add(1) > maxFetches {
				h.fetching.Add(-1)
				ctx.Respond(&messages.ShardLoaded{Shard: spec, Error: h.label() + fmt.Sprintf("already fetching %d shards; try again later", maxFetches)})
				return
			}
			// Fetching may take minutes: off the actor, which goes on
			// serving loads of shards whose bytes are here.
			replyTo, self, sys := ctx.Sender(), ctx.Self(), ctx.ActorSystem()
			go func() {
				fctx, cancel := context.WithTimeout(h.stop, fetchTimeout)
				_, err := f.Ensure(fctx, spec.Model, int(spec.First), int(spec.End), int(spec.Layers))
				cancel()
				// The slot is free before the answer goes out: whoever
				// hears it may ask again at once.
				h.fetching.Add(-1)
				sys.Root.Send(self, &fetched{spec: spec, group: m.Group, replyTo: replyTo, err: err})
			}()
			return
		}
		ctx.Respond(h.load(ctx, spec, m.Group))
	case *fetched:
		reply := &messages.ShardLoaded{Shard: m.spec}
		if h.leaving {
			reply = h.leavingAnswer(m.spec)
		} else if m.err != nil {
			reply.Error, reply.FetchFailed = h.label()+m.err.Error(), true
		} else {
			reply = h.load(ctx, m.spec, m.group)
		}
		if m.replyTo != nil {
			ctx.Send(m.replyTo, reply)
		}
	case *messages.ShardStats:
		if s := ctx.Sender(); s != nil && s.Address != ctx.Self().Address {
			// A peer: nothing. The list names every loaded shard's spec
			// and actor, which no peer needs (a ring probes its own
			// stages, which answer for themselves) and which is where
			// re-forming a stage's group started.
			ctx.Respond(&messages.ShardStatsReply{})
			return
		}
		ctx.Respond(h.Stats())
	case *actor.Terminated:
		if !h.childStopped(m.Who) {
			h.memberStopped(m.Who)
		}
	case *actor.Stopped:
		h.close()
	}
}

// leavingAnswer refuses a load while the node leaves.
func (h *Host) leavingAnswer(spec *messages.ShardSpec) *messages.ShardLoaded {
	if spec == nil {
		spec = &messages.ShardSpec{}
	}
	return &messages.ShardLoaded{Shard: spec, Leaving: true, Error: h.label() + "the node is leaving the cluster"}
}

// childStopped forgets a shard actor that stopped (evicted, or crashed):
// its weights and any KV caches it still held are released. false: pid
// is none of this host's shards.
func (h *Host) childStopped(pid *actor.PID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.shards {
		if s.pid.Equal(pid) {
			h.forgetLocked(s, s.weightBytes+s.kvBytes())
			h.changedLocked()
			return true
		}
	}
	return false
}

// forgetLocked takes shard s out of the table and its memory, bytes of
// weights and KV, and its device scratch out of the counts.
func (h *Host) forgetLocked(s *shard, bytes uint64) {
	delete(h.shards, ShardID(s.spec))
	h.used -= min(bytes, h.used)
	h.deviceUsed -= min(s.deviceBytes, h.deviceUsed)
}

// groupActorOK reports whether id can be group PID i of a
// tensor-parallel LoadShard for spec: a host (a top-level actor, named
// HostName on a real node) for a member, whose one PID is its leader's
// host; for the leader, member i+1's shard actor of this very stage,
// HOST/ShardID#N.
func (h *Host) groupActorOK(spec *messages.ShardSpec, i int, id string) bool {
	host, rest, child := strings.Cut(id, "/")
	if host == "" || h.cfg.NodeAddress != nil && host != HostName {
		return false
	}
	if spec.TpIndex > 0 {
		return !child
	}
	m := &messages.ShardSpec{Model: spec.Model, First: spec.First, End: spec.End, Layers: spec.Layers,
		TpNodes: spec.TpNodes, TpWeights: spec.TpWeights, TpIndex: uint32(i + 1), TpExpertParallel: spec.TpExpertParallel}
	n, ok := strings.CutPrefix(rest, ShardID(m)+"#")
	return child && ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// watchMembers watches the members' shard actors a tensor-parallel
// leader relays to, so the host learns when one stops (memberStopped).
func (h *Host) watchMembers(ctx actor.Context, tp *tpShard, pids []*actor.PID) {
	if !tp.leads() {
		return
	}
	for _, p := range pids {
		ctx.Watch(p)
	}
}

// memberStopped records that a watched member shard actor is gone.
func (h *Host) memberStopped(pid *actor.PID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.goneMembers == nil {
		h.goneMembers = map[string]bool{}
	}
	if len(h.goneMembers) >= maxGoneMembers {
		clear(h.goneMembers) // bounded; a member refused for it is asked again by the next plan
	}
	h.goneMembers[pid.Address+"/"+pid.Id] = true
}

// maxGoneMembers bounds the stopped member actors a host remembers.
const maxGoneMembers = 4096

// regroupLocked gives a loaded tensor-parallel shard the group a plan
// names: a leader takes a member's new actor only in place of one that
// stopped (under h.mu).
func (h *Host) regroupLocked(ctx actor.Context, tp *tpShard, pids []*actor.PID) error {
	cur := tp.group.Load()
	if tp.leads() && cur != nil && len(*cur) == len(pids) {
		for i, p := range pids {
			old := (*cur)[i]
			if !p.Equal(old) && !h.goneMembers[old.Address+"/"+old.Id] {
				return fmt.Errorf("tensor-parallel member %d runs as %s, which has not stopped: not replaced by %.64q", i+1, old.Id, p.Id)
			}
		}
		for i, p := range pids {
			if old := (*cur)[i]; !p.Equal(old) {
				delete(h.goneMembers, old.Address+"/"+old.Id)
				ctx.Watch(p)
			}
		}
	}
	tp.group.Store(&pids)
	return nil
}

func (h *Host) load(ctx actor.Context, spec *messages.ShardSpec, group []*messages.PID) *messages.ShardLoaded {
	reply := &messages.ShardLoaded{Shard: spec}
	fail := func(err error) *messages.ShardLoaded {
		reply.Error = h.label() + err.Error()
		return reply
	}
	if spec == nil || spec.Model == "" {
		return fail(errors.New("LoadShard without a model"))
	}
	pids, err := h.groupPIDs(spec, group)
	if err != nil {
		return fail(err)
	}
	id := ShardID(spec)
	if s, err := h.reuse(ctx, id, pids); err != nil {
		return fail(err)
	} else if s != nil {
		reply.ActorId, reply.Bytes = s.pid.Id, s.weightBytes
		return reply
	}
	// Opening the files and mapping the layers read the disk (and may
	// fetch headers from peers), which can take long: without h.mu, which
	// every heartbeat needs (UsedBytes). Only this actor adds shards, so
	// nobody loads the same one meanwhile.
	s, err := h.open(ctx, spec, pids)
	if err != nil {
		return fail(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reserveLocked(s.weightBytes, fmt.Sprintf("loading %s", id), nil); err != nil {
		reply.Busy = true
		return fail(err)
	}
	if err := h.spawnLocked(ctx, s, id); err != nil {
		h.used -= s.weightBytes
		return fail(err)
	}
	reply.ActorId, reply.Bytes = s.pid.Id, s.weightBytes
	return reply
}

// groupPIDs checks a tensor-parallel LoadShard's group: the leader relays
// to every other member's shard actor of this very stage, a member hears
// from its leader's host; each PID on the node the spec names for it.
// nil for a stage on one node.
func (h *Host) groupPIDs(spec *messages.ShardSpec, group []*messages.PID) ([]*actor.PID, error) {
	if len(spec.TpNodes) == 0 {
		return nil, nil
	}
	if err := checkTPSpec(spec); err != nil {
		return nil, err
	}
	if h.cfg.Groups == nil {
		return nil, errors.New("this node cannot join tensor-parallel groups")
	}
	if want := len(spec.TpNodes) - 1; spec.TpIndex == 0 && len(group) != want || spec.TpIndex > 0 && len(group) != 1 {
		return nil, fmt.Errorf("tensor-parallel member %d of %d with %d group PIDs", spec.TpIndex, len(spec.TpNodes), len(group))
	}
	var pids []*actor.PID
	for i, p := range group {
		if p == nil || p.Id == "" || len(p.Id) > 1024 || len(p.Address) > 1024 {
			return nil, errors.New("a malformed group PID")
		}
		member := spec.TpNodes[0] // a member's one PID: the leader's host
		if spec.TpIndex == 0 {
			member = spec.TpNodes[i+1]
		}
		if h.cfg.NodeAddress != nil && p.Address != h.cfg.NodeAddress(member) {
			return nil, fmt.Errorf("tensor-parallel group PID %d is on %s, not on member %s", i, p.Address, member)
		}
		if !h.groupActorOK(spec, i, p.Id) {
			return nil, fmt.Errorf("tensor-parallel group PID %d is %.64q: not the actor the stage's member %s runs it with", i, p.Id, member)
		}
		pids = append(pids, wire.PID(p))
	}
	return pids, nil
}

// reuse returns the shard id if it is loaded already (nil if not), used
// now and pinned. A plan that finds a tensor-parallel shard loaded names
// the group again: a member reloaded under a new actor is taken; a member
// whose actor is alive is kept (anyone with the secret may send
// LoadShard, and a group pointed elsewhere stalls every session of the
// stage).
func (h *Host) reuse(ctx actor.Context, id string, pids []*actor.PID) (*shard, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.shards[id]
	if !ok {
		return nil, nil
	}
	h.clock++
	s.lastUse.Store(h.clock)
	s.pin()
	if s.tp != nil {
		if err := h.regroupLocked(ctx, s.tp, pids); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// open maps a shard's weights from the model's file (a tensor-parallel
// member's slice of them) and returns the shard, not yet spawned.
func (h *Host) open(ctx actor.Context, spec *messages.ShardSpec, pids []*actor.PID) (*shard, error) {
	f, err := h.file(spec.Model)
	if err != nil {
		return nil, err
	}
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	if spec.Layers != uint32(cfg.Layers) {
		return nil, fmt.Errorf("model %s has %d layers here, the plan expects %d (different files under one name?)", spec.Model, cfg.Layers, spec.Layers)
	}
	maxCtx := cfg.Context
	if h.cfg.MaxContext > 0 {
		maxCtx = min(maxCtx, h.cfg.MaxContext)
	}
	s := &shard{host: h, spec: spec, file: f, maxContext: maxCtx, sessions: map[string]*shardSession{}}
	if len(spec.TpNodes) > 0 {
		tm, b, err := loadTP(f, cfg, spec, h.cfg.KVType)
		if err != nil {
			return nil, err
		}
		// The shard's bookkeeping reads the model's shape and range only.
		s.m = &model.Model{Config: tm.Config, First: tm.First, End: tm.End}
		s.tp = &tpShard{m: tm, index: int(spec.TpIndex), nodes: spec.TpNodes, groups: h.cfg.Groups, stageID: tpStageID(spec), stop: h.stop}
		s.tp.group.Store(&pids)
		h.watchMembers(ctx, s.tp, pids)
		s.weightBytes = b
		return s, nil
	}
	if s.m, err = model.Load(f, int(spec.First), int(spec.End)); err != nil {
		return nil, err
	}
	if err := s.m.SetKVType(h.cfg.KVType); err != nil {
		return nil, err
	}
	prof, err := model.ProfileOf(f)
	if err != nil {
		return nil, err
	}
	s.weightBytes = plan.FromProfile(spec.Model, prof).StageBytes(int(spec.First), int(spec.End))
	s.batch.limit = min(s.m.InvariantRows(), wire.MaxBatch)
	return s, nil
}

// spawnLocked gives a shard its scratch state and starts its actor under
// the host, as shard id (h.mu held; its memory reserved).
func (h *Host) spawnLocked(ctx actor.Context, s *shard, id string) error {
	h.clock++
	s.lastUse.Store(h.clock)
	s.pin()
	if s.tp != nil {
		s.tp.state = s.tp.m.NewState(h.cfg.Pool, wire.MaxBatch, s.maxContext)
	} else {
		s.state = s.m.NewState(h.cfg.Pool, wire.MaxBatch, s.maxContext)
		if h.cfg.Accelerate != nil {
			// A device that cannot take the shard leaves it on the CPU.
			free := uint64(math.MaxUint64)
			if h.cfg.DeviceBytes > 0 {
				free = h.cfg.DeviceBytes - min(h.deviceUsed, h.cfg.DeviceBytes)
			}
			if a, err := h.cfg.Accelerate(s.m, wire.MaxBatch, free); err == nil && a.Acc != nil {
				if a.Bytes > free { // the hook's to refuse; never over the budget
					if a.Release != nil {
						a.Release()
					}
				} else {
					s.state.Accelerate(a.Acc)
					s.releaseAcc, s.deviceBytes = a.Release, a.Bytes
					h.deviceUsed += a.Bytes
				}
			}
		}
	}
	// The PID is known before the actor starts, so nothing reads it half-set.
	h.spawns++
	name := fmt.Sprintf("%s#%d", id, h.spawns)
	s.pid = actor.NewPID(ctx.Self().Address, ctx.Self().Id+"/"+name)
	pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return s }, actor.WithSenderMiddleware(h.cfg.SenderMiddleware...)), name)
	if err != nil {
		if s.releaseAcc != nil {
			s.releaseAcc()
			s.releaseAcc = nil
		}
		h.deviceUsed -= min(s.deviceBytes, h.deviceUsed)
		s.deviceBytes = 0
		return fmt.Errorf("spawn %s: %v", id, err)
	}
	if !pid.Equal(s.pid) {
		panic("actors: shard PID " + pid.String() + " is not the one computed, " + s.pid.String())
	}
	h.shards[id] = s
	h.changedLocked()
	return nil
}

// has reports whether the shard is loaded already.
func (h *Host) has(spec *messages.ShardSpec) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.shards[ShardID(spec)]
	return ok
}

// Uses reports whether a loaded shard reads model's files.
func (h *Host) Uses(model string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.shards {
		if s.spec.Model == model {
			return true
		}
	}
	return false
}

// File returns the node's open file of a model (opening it on first use).
// The host owns it: it stays open until the host stops.
func (h *Host) File(name string) (*gguf.File, error) { return h.file(name) }

// Info describes a model (its open file's, read on first use): the one
// description its origin plans and tokenizes with, its API renders and
// counts with, and its stages constrain sampling with.
func (h *Host) Info(name string) (*modelinfo.Info, error) {
	f, err := h.file(name)
	if err != nil {
		return nil, err
	}
	return h.infoOf(f)
}

// infoOf describes the model of one of the host's open files. Two callers
// may read it at once; the first kept is the one every caller gets.
func (h *Host) infoOf(f *gguf.File) (*modelinfo.Info, error) {
	h.mu.Lock()
	in, ok := h.infos[f]
	h.mu.Unlock()
	if ok {
		return in, nil
	}
	in, err := modelinfo.Read(f)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if kept, ok := h.infos[f]; ok {
		return kept, nil
	}
	h.infos[f] = in
	return in, nil
}

// file returns the open files of a model, reopening them when the store
// holds a new version. It takes h.mu only around the map: finding and
// opening the files is I/O. Two callers that open one file at once both
// open it; the second copy is kept with the stale ones, closed at stop.
func (h *Host) file(name string) (*gguf.File, error) {
	path, version := "", 0
	var err error
	if v, ok := h.cfg.Models.(shardFetcher); ok {
		path, version, err = v.PathVersion(name)
	} else {
		path, err = h.cfg.Models.Path(name)
	}
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%d", path, version)
	h.mu.Lock()
	if f, ok := h.files[name]; ok && h.fileKeys[name] == key {
		h.mu.Unlock()
		return f, nil
	}
	h.mu.Unlock()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.files[name]; ok {
		h.stale = append(h.stale, old) // loaded shards may still read it
		delete(h.infos, old)
	}
	h.files[name], h.fileKeys[name] = f, key
	return f, nil
}

// changedLocked tells OnShards the current shard list (h.mu held).
func (h *Host) changedLocked() {
	if h.cfg.OnShards == nil {
		return
	}
	var specs []*messages.ShardSpec
	for _, s := range h.shards {
		specs = append(specs, s.spec)
	}
	h.cfg.OnShards(ShardList(specs))
}

func (h *Host) label() string {
	if h.cfg.Name == "" {
		return ""
	}
	return "node " + h.cfg.Name + ": "
}

// reserveLocked takes n bytes of the node's budget (h.mu held), first
// unloading idle shards (no sessions), least recently used first, when
// the budget is short: plans change when nodes come and go, and shards of
// old plans must not pin the memory new ones need.
// keep (may be nil) is the shard asking, which is never evicted.
func (h *Host) reserveLocked(n uint64, what string, keep *shard) error {
	if h.cfg.MemoryBytes > 0 && h.used+n > h.cfg.MemoryBytes {
		// Retained prompt caches go first: they cost one prefill to
		// rebuild, an unloaded shard a load.
		h.evictCachedLocked(h.used + n - h.cfg.MemoryBytes)
	}
	if h.cfg.MemoryBytes > 0 && h.used+n > h.cfg.MemoryBytes {
		h.evictLocked(h.used+n-h.cfg.MemoryBytes, keep)
	}
	if h.cfg.MemoryBytes > 0 && h.used+n > h.cfg.MemoryBytes {
		return fmt.Errorf("%s needs %s, but only %s of the node's %s are free", what,
			units.Bytes(n), units.Bytes(h.cfg.MemoryBytes-min(h.used, h.cfg.MemoryBytes)), units.Bytes(h.cfg.MemoryBytes))
	}
	h.used += n
	return nil
}

// unloadTick is the host's tick for HostConfig.UnloadAfter.
type unloadTick struct{}

// unloadIdle unloads the shards no session has used for UnloadAfter.
func (h *Host) unloadIdle(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.shards {
		if s.unusedFor(now) >= h.cfg.UnloadAfter {
			h.unloadLocked(s)
			n++
		}
	}
	if n > 0 {
		h.changedLocked()
	}
}

// unloadLocked forgets an idle shard, releases its memory and stops its
// actor; it returns the bytes released (h.mu held).
func (h *Host) unloadLocked(s *shard) uint64 {
	n := s.weightBytes + s.dropAllCached() // an idle shard's KV memory is its cache entries
	h.forgetLocked(s, n)
	if h.system != nil {
		h.system.Root.Stop(s.pid)
	}
	return n
}

// evictLocked unloads idle shards until need bytes are released or none is left.
func (h *Host) evictLocked(need uint64, keep *shard) {
	var idle []*shard
	for _, s := range h.shards {
		if s != keep && s.idle() {
			idle = append(idle, s)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUse.Load() < idle[j].lastUse.Load() })
	var freed uint64
	for _, s := range idle {
		if freed >= need {
			break
		}
		freed += h.unloadLocked(s)
	}
	if freed > 0 {
		h.changedLocked()
	}
}

func (h *Host) reserve(n uint64, what string, keep *shard) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserveLocked(n, what, keep)
}

func (h *Host) release(n uint64) {
	h.mu.Lock()
	h.used -= min(n, h.used)
	h.mu.Unlock()
}

// Fetching is how many shards the host is fetching from peers now.
func (h *Host) Fetching() int { return int(h.fetching.Load()) }

// UsedBytes is the weights and KV caches the node holds now.
func (h *Host) UsedBytes() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.used
}

// DeviceUsedBytes is the memory the shards' devices take for their
// scratch now (of HostConfig.DeviceBytes).
func (h *Host) DeviceUsedBytes() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deviceUsed
}

// Stats describes every shard on the node.
func (h *Host) Stats() *messages.ShardStatsReply {
	h.mu.Lock()
	shards := make([]*shard, 0, len(h.shards))
	for _, s := range h.shards {
		shards = append(shards, s)
	}
	h.mu.Unlock()
	sort.Slice(shards, func(i, j int) bool { return shards[i].pid.Id < shards[j].pid.Id })
	r := &messages.ShardStatsReply{}
	for _, s := range shards {
		r.Shards = append(r.Shards, s.stats())
	}
	return r
}

func (h *Host) close() {
	h.cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.files {
		f.Close()
	}
	for _, f := range h.stale {
		f.Close()
	}
	h.files, h.fileKeys, h.stale = map[string]*gguf.File{}, map[string]string{}, nil
	if h.ownPool != nil {
		// The shards, children of the host, have stopped before it.
		h.ownPool.Close()
	}
}
