package stage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/messages"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

// Tensor-parallel stages. A plan stage may be a group of members, each
// holding a slice of every layer of the stage (model.LoadTP). The session
// talks to one actor per stage, the group's leader (member 0): it relays
// every Forward it takes to the other members' shard actors, then every
// member runs its slice, all-reducing with the others twice per layer,
// and the leader alone passes the result on (or samples, on the last
// stage). The members are peers of the leader, not of the session.
//
// Every session has an all-reduce group of its own (its ID derived from
// the session's and the stage's), formed on the session's first step and
// closed when the session ends. A group that fails (a member died, a
// link broke) fails only that session's step: the leader reports
// ForwardError.group_failed, the origin probes the ring's members and
// re-plans without the silent ones (the replay starts a new session, and
// so a new group), while the shard, loaded once for every session, stays
// usable. Because only the leader feeds its members, in one order, the
// members see each session's steps as the leader does.
//
// Trust: a member takes a session's steps and frees only from the
// leader's node (LoadShard.group names its host); the leader takes them
// from the session's origin, as any stage does.

// Bounds of one tensor-parallel step.
const (
	// tpJoinTimeout bounds forming a session's group: the members get its
	// first step right after the leader.
	tpJoinTimeout = 20 * time.Second
	// tpStepTimeout bounds one step's compute and all-reduces (a member's
	// round timeout, allreduce.DefaultRoundTimeout, usually ends it first).
	tpStepTimeout = 2 * time.Minute
)

// errGroup marks an error of a step's all-reduce group (forming it, or a
// round): the origin probes the members instead of giving up.
var errGroup = errors.New("tensor-parallel group failed")

// tpShard is what a shard of a tensor-parallel stage holds besides what
// every shard does.
type tpShard struct {
	m       *model.TPModel
	state   *model.TPState
	index   int      // this member's place in nodes
	nodes   []string // the members' node IDs, in summation order
	groups  Groups
	stageID [32]byte // hashes the stage (model, layers, members, weights): group IDs
	// group is, on the leader, the members' shard actors (1..n-1) to relay
	// to; on a member, one PID: the leader's host. LoadShard sets it, and
	// again when a plan finds the shard loaded (a member may have been
	// reloaded under a new actor).
	group atomic.Pointer[[]*actor.PID]
	// stop ends the steps in flight when the host stops.
	stop context.Context
}

func (t *tpShard) leads() bool { return t.index == 0 }

// groupID is the all-reduce group of one session on this stage.
func (t *tpShard) groupID(session string) [16]byte {
	h := sha256.New()
	h.Write(t.stageID[:])
	h.Write([]byte(session))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// fromLeader reports whether pid is a shard actor of the leader's host.
func (t *tpShard) fromLeader(pid *actor.PID) bool {
	g := t.group.Load()
	if pid == nil || g == nil || len(*g) != 1 {
		return false
	}
	host := (*g)[0]
	return pid.Address == host.Address && strings.HasPrefix(pid.Id, host.Id+"/")
}

// cacheBytes is one session's KV cache of the member's heads, as
// TPModel.NewCache allocates it.
func (t *tpShard) cacheBytes(capacity int) uint64 { return t.m.CacheBytes(capacity) }

// checkTPSpec validates the tensor-parallel fields of a peer's shard spec.
func checkTPSpec(spec *messages.ShardSpec) error {
	n := len(spec.TpNodes)
	switch {
	case n < 2 || n > 64:
		return fmt.Errorf("a tensor-parallel group of %d members (2 to 64)", n)
	case len(spec.TpWeights) != n:
		return fmt.Errorf("a tensor-parallel group of %d members with %d weights", n, len(spec.TpWeights))
	case int(spec.TpIndex) >= n:
		return fmt.Errorf("member %d of a tensor-parallel group of %d", spec.TpIndex, n)
	}
	seen := map[string]bool{}
	for i, id := range spec.TpNodes {
		if id == "" || seen[id] || len(id) > 256 {
			return fmt.Errorf("tensor-parallel member %d: node ID %q is empty, repeated or too long", i, id)
		}
		seen[id] = true
		if w := spec.TpWeights[i]; w == 0 || w > 1<<40 {
			return fmt.Errorf("tensor-parallel member %d: weight %d is not in 1..2^40", i, w)
		}
	}
	return nil
}

// tpStageID hashes what identifies a tensor-parallel stage, the same on
// every member (the member's own index left out). How the stage holds
// its experts is part of it: members that cut their slices differently
// must never meet in one group (nor share a loaded shard, ShardID).
func tpStageID(spec *messages.ShardSpec) [32]byte {
	var b strings.Builder
	fmt.Fprintf(&b, "strata/tp\x00%s\x00%d-%d/%d", spec.Model, spec.First, spec.End, spec.Layers)
	for i, n := range spec.TpNodes {
		fmt.Fprintf(&b, "\x00%s=%d", n, spec.TpWeights[i])
	}
	if spec.TpExpertParallel { // appended only when set: column splits keep their IDs
		b.WriteString("\x00experts-whole")
	}
	return sha256.Sum256([]byte(b.String()))
}

// loadTP builds member spec.TpIndex's slice of the stage: the group's
// slices are model.PlanTPWith's for the weights and the plan's expert
// layout (spec.TpExpertParallel), the same on every member. It returns
// the slice, its KV caches of type kv, and the bytes it holds.
func loadTP(f *gguf.File, cfg model.Config, spec *messages.ShardSpec, kv model.KVType) (*model.TPModel, uint64, error) {
	if err := checkTPSpec(spec); err != nil {
		return nil, 0, err
	}
	if spec.TpExpertParallel && cfg.Experts == 0 {
		return nil, 0, fmt.Errorf("model %s has no experts, but the plan holds its layers %d-%d as whole experts per member (expert parallelism)", spec.Model, spec.First, spec.End-1)
	}
	first, end := int(spec.First), int(spec.End)
	units, err := model.TPUnitsOf(f, cfg, first, end)
	if err != nil {
		return nil, 0, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 || emb.Dims[1] > 1<<30 {
		return nil, 0, fmt.Errorf("model %s: token_embd.weight is missing or not 2-D", spec.Model)
	}
	slices, err := model.PlanTPWith(cfg, int(emb.Dims[1]), units, spec.TpWeights, model.TPOptions{ExpertParallel: spec.TpExpertParallel})
	if err != nil {
		return nil, 0, err
	}
	m, err := model.LoadTP(f, first, end, slices[spec.TpIndex])
	if err != nil {
		return nil, 0, err
	}
	if err := m.SetKVType(kv); err != nil {
		return nil, 0, err
	}
	bytes := uint64(m.SliceBytes())
	if m.IsFirst() {
		// Every member embeds the tokens, reading the embedding's rows
		// from the mapped file: counted whole, as a pipeline's first stage.
		bytes += emb.Size
	}
	return m, bytes, nil
}

// tpStep runs one step of session ss through this member's slice: the
// input (token ids on the first stage, else hidden states) into the
// member's state, the layers with their all-reduces, and, when the step
// samples on the last stage, the logits. Every member calls it with the
// same message. On the leader it first relays m to the other members.
func (s *shard) tpStep(ctx actor.Context, m *messages.Forward, ss *shardSession, n int) (hidden, logits []float32, err error) {
	t := s.tp
	if ss.arErr != nil {
		return nil, nil, ss.arErr
	}
	if t.leads() {
		if g := t.group.Load(); g != nil {
			for _, pid := range *g {
				ctx.Request(pid, m)
			}
		}
	}
	pos := int(m.Position)
	if pos > ss.tpc.Len {
		return nil, nil, fmt.Errorf("session %s: step at position %d, but the cache holds %d positions", m.Session, pos, ss.tpc.Len)
	}
	if ss.ar == nil {
		jctx, cancel := context.WithTimeout(t.stop, tpJoinTimeout)
		ss.ar, err = t.groups.Join(jctx, t.groupID(m.Session), t.nodes, t.index)
		cancel()
		if err != nil {
			ss.arErr = fmt.Errorf("%w: forming session %s's group: %w", errGroup, m.Session, err)
			return nil, nil, ss.arErr
		}
	}
	ss.tpc.Len = pos
	st, embd := t.state, t.m.Embd
	if t.m.IsFirst() {
		if len(m.Tokens) != n {
			return nil, nil, fmt.Errorf("first stage got %d tokens for %d positions", len(m.Tokens), n)
		}
		ids := s.ids[:n]
		for i, tok := range m.Tokens {
			ids[i] = int(tok)
		}
		if err := st.Embed(ids); err != nil {
			return nil, nil, err
		}
	} else if err := decodeHidden(st.X[:n*embd], m.Hidden, m.HiddenType); err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithTimeout(t.stop, tpStepTimeout)
	defer cancel()
	fail := func(err error) error {
		ss.arErr = fmt.Errorf("%w: session %s at position %d: %w", errGroup, m.Session, pos, err)
		ss.ar.Close()
		return ss.arErr
	}
	if err := st.Forward(sctx, ss.tpc, n, ss.ar); err != nil {
		return nil, nil, fail(err)
	}
	if t.m.IsLast() && m.Sample {
		// A step with guesses needs the logits of the rows from its first
		// sampled one on: gathered one row at a time (the same gather as
		// a one-token step's, so each row's logits are its own).
		rows := 1 + len(m.Guesses)
		if rows > 1 {
			vocab := t.m.Vocab
			if cap(s.verifyLogits) < rows*vocab {
				s.verifyLogits = make([]float32, rows*vocab)
			}
			logits = s.verifyLogits[:rows*vocab]
		}
		for j := range rows {
			row, err := st.LogitsOf(sctx, n-rows+j, ss.ar)
			if err != nil {
				return nil, nil, fail(err)
			}
			if rows == 1 {
				logits = row
			} else {
				copy(logits[j*t.m.Vocab:], row)
			}
		}
	}
	return st.X[:n*embd], logits, nil
}

// relayFree passes a free (or a retain, or the free of a retained entry)
// on to the members of the leader's group, in order after the steps it
// relayed before. ctx.Request, so the members see the leader as the
// sender.
func (s *shard) relayFree(ctx actor.Context, session string, retain bool) {
	if s.tp == nil || !s.tp.leads() {
		return
	}
	if g := s.tp.group.Load(); g != nil {
		for _, pid := range *g {
			ctx.Request(pid, &messages.FreeSession{Session: session, Retain: retain})
		}
	}
}

// abandon tells the group of a session's step this member cannot run (a
// prompt-cache entry it no longer holds, a session it does not have)
// that it will not take part: it joins the session's group and leaves it
// at once, so that the leader's round fails now rather than after
// tpJoinTimeout. The origin, told why by this member, runs the whole
// prompt again.
func (t *tpShard) abandon(session string) {
	go func() {
		ctx, cancel := context.WithTimeout(t.stop, tpJoinTimeout)
		defer cancel()
		if g, err := t.groups.Join(ctx, t.groupID(session), t.nodes, t.index); err == nil {
			g.Close()
		}
	}()
}
