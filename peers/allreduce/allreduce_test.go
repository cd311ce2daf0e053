package allreduce_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"strata/internal/testdata"
	"strata/peers"
	"strata/peers/allreduce"
	"strata/peers/peerstest"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

var _ model.AllReducer = (*allreduce.Group)(nil)

// formGroup forms a group of nodes (in that order) with a fresh ID.
func formGroup(t testing.TB, nodes []*peers.Node, opts allreduce.Options) []*allreduce.Group {
	t.Helper()
	id := allreduce.NewGroupID()
	ids := make([]peer.ID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gs := make([]*allreduce.Group, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs[i], errs[i] = n.AllReduce().Join(ctx, id, ids, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: join: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, g := range gs {
			g.Close()
		}
	})
	return gs
}

func ars(gs []*allreduce.Group) []model.AllReducer {
	out := make([]model.AllReducer, len(gs))
	for i, g := range gs {
		out[i] = g
	}
	return out
}

func openStories(t testing.TB) *gguf.File {
	t.Helper()
	dir, err := testdata.Dir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(filepath.Join(dir, "gguf", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func loadTP(t testing.TB, f *gguf.File, weights []uint64) []*model.TPModel {
	t.Helper()
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	u, err := model.TPUnitsOf(f, c, 0, c.Layers)
	if err != nil {
		t.Fatal(err)
	}
	emb, _ := f.Tensor("token_embd.weight")
	slices, err := model.PlanTP(c, int(emb.Dims[1]), u, weights)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*model.TPModel
	for _, s := range slices {
		m, err := model.LoadTP(f, 0, c.Layers, s)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// decode runs the members (one goroutine each) over prompt and then
// greedily for steps tokens; with force set, the tokens fed are force's
// instead of the argmax (teacher forcing). It returns each member's
// tokens and member 0's logits per step, and each member's error.
// onStep, when set, is called by member 0 after each step.
func decode(members []*model.TPModel, ar []model.AllReducer, prompt []int, steps int, force []int, onStep func(int)) ([][]int, [][]float32, []error) {
	toks := make([][]int, len(members))
	errs := make([]error, len(members))
	var logits [][]float32
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			capacity := len(prompt) + steps
			s, c := m.NewState(nil, len(prompt), capacity), m.NewCache(capacity)
			tokens := prompt
			for step := 0; step < steps; step++ {
				if errs[i] = s.Embed(tokens); errs[i] != nil {
					return
				}
				if errs[i] = s.Forward(ctx, c, len(tokens), ar[i]); errs[i] != nil {
					return
				}
				l, err := s.LogitsOf(ctx, len(tokens)-1, ar[i])
				if err != nil {
					errs[i] = err
					return
				}
				next := argmax(l)
				toks[i] = append(toks[i], next)
				if i == 0 {
					logits = append(logits, append([]float32(nil), l...))
				}
				if force != nil {
					next = force[step]
				}
				tokens = []int{next}
				if i == 0 && onStep != nil {
					onStep(step)
				}
			}
		}()
	}
	wg.Wait()
	return toks, logits, errs
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func oneNodeGreedy(t testing.TB, f *gguf.File, prompt []int, steps int) []int {
	t.Helper()
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, 0, c.Layers)
	if err != nil {
		t.Fatal(err)
	}
	s, cache := m.NewState(nil, len(prompt), len(prompt)+steps), m.NewCache(len(prompt)+steps)
	var out []int
	tokens := prompt
	for range steps {
		if err := s.Embed(tokens); err != nil {
			t.Fatal(err)
		}
		if err := s.Forward(cache, len(tokens)); err != nil {
			t.Fatal(err)
		}
		l, err := s.LogitsOf(len(tokens) - 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, argmax(l))
		tokens = out[len(out)-1:]
	}
	return out
}

// TestGroupTPGreedy: 2-way and uneven 3-way groups of libp2p nodes
// decode stories260K greedily with the all-reduce over the wire; every
// member's text equals one node's.
func TestGroupTPGreedy(t *testing.T) {
	f := openStories(t)
	const steps = 64
	want := oneNodeGreedy(t, f, []int{1}, steps)
	c := peerstest.New(t, 3)
	for _, tc := range []struct {
		w   []uint64
		shm bool
	}{{[]uint64{1, 1}, false}, {[]uint64{2, 1, 1}, false}, {[]uint64{1, 1}, true}, {[]uint64{2, 1, 1}, true}} {
		w := tc.w
		gs := formGroup(t, c.Nodes[:len(w)], allreduce.Options{Shm: tc.shm})
		if tc.shm {
			for i, g := range gs {
				if allreduce.GroupRings(g) != len(w)-1 {
					t.Fatalf("weights %v: member %d sends through %d rings, want %d", w, i, allreduce.GroupRings(g), len(w)-1)
				}
			}
		}
		toks, _, errs := decode(loadTP(t, f, w), ars(gs), []int{1}, steps, nil, nil)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("weights %v: member %d: %v", w, i, err)
			}
			for j := range want {
				if toks[i][j] != want[j] {
					t.Fatalf("weights %v: member %d's token %d is %d, one node's %d", w, i, j, toks[i][j], want[j])
				}
			}
		}
	}
}

// TestGroupWireError: over the wire in F32, a group's logits are bit for
// bit the in-process group's (the same sums in the same order); F16 and
// Q8_0 round every partial sum, and this measures what that costs on
// stories260K and on a tinyllama-1.1b-shaped model (2 layers, Q8_0
// weights), teacher-forced over 32 positions, as the largest difference
// relative to the position's largest |logit|.
func TestGroupWireError(t *testing.T) {
	tinyPath := filepath.Join(t.TempDir(), "tiny.gguf")
	shape := model.Shapes["tinyllama-1.1b"]
	shape.Vocab, shape.Peaked = 4096, true
	if err := synth.WriteFile(tinyPath, shape, synth.Options{Type: tensor.Q8_0, Seed: 7, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	tiny, err := gguf.Open(tinyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	c := peerstest.New(t, 2)
	// Bounds: about 4x the worst measured (F16: 4.5e-4 on stories260K,
	// 2.4e-3 on the tinyllama shape, where Q8_0 weights quantize each
	// layer's input to 8 bits and so amplify any change; Q8_0: 1.0e-2 and
	// 5.6e-3).
	bounds := map[allreduce.Wire]float64{allreduce.WireF16: 1e-2, allreduce.WireQ8_0: 4e-2}
	for _, tc := range []struct {
		name   string
		f      *gguf.File
		prompt []int
	}{{"stories260K", openStories(t), []int{1}}, {"tinyllama-shape Q8_0", tiny, []int{1, 300, 1200, 7, 99}}} {
		const steps = 32
		members := loadTP(t, tc.f, []uint64{1, 1})
		force, ref, errs := decode(members, model.LocalGroup(2), tc.prompt, steps, nil, nil)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, wire := range []allreduce.Wire{allreduce.WireF32, allreduce.WireF16, allreduce.WireQ8_0} {
			members := loadTP(t, tc.f, []uint64{1, 1})
			gs := formGroup(t, c.Nodes, allreduce.Options{Wire: wire})
			_, got, errs := decode(members, ars(gs), tc.prompt, steps, force[0], nil)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("%s over %s: %v", tc.name, wire, err)
			}
			var rel float64
			argmaxSame := 0
			for p := range ref {
				var scale, d float64
				for j := range ref[p] {
					scale = max(scale, math.Abs(float64(ref[p][j])))
					d = max(d, math.Abs(float64(ref[p][j]-got[p][j])))
					if wire == allreduce.WireF32 && math.Float32bits(ref[p][j]) != math.Float32bits(got[p][j]) {
						t.Fatalf("%s over f32: logit %d at step %d is %v, in-process %v", tc.name, j, p, got[p][j], ref[p][j])
					}
				}
				rel = max(rel, d/scale)
				if argmax(ref[p]) == argmax(got[p]) {
					argmaxSame++
				}
			}
			t.Logf("%s, wire %s: largest logit difference from the F32 wire %.2e of the position's largest |logit|; argmax equal at %d of %d positions",
				tc.name, wire, rel, argmaxSame, len(ref))
			if b, ok := bounds[wire]; ok && rel > b {
				t.Errorf("%s, wire %s: logits differ by %.2e (bound %.0e)", tc.name, wire, rel, b)
			}
		}
	}
}

// TestGroupMemberVanishes: a member's host dies mid-decode; the other
// member's AllReduce fails promptly (its streams close), long before the
// round timeout, so its caller can re-plan.
func TestGroupMemberVanishes(t *testing.T) {
	for _, shm := range []bool{false, true} {
		t.Run(fmt.Sprintf("shm=%v", shm), func(t *testing.T) { memberVanishes(t, shm) })
	}
}

func memberVanishes(t *testing.T, shm bool) {
	f := openStories(t)
	c := peerstest.New(t, 2)
	gs := formGroup(t, c.Nodes, allreduce.Options{Shm: shm}) // DefaultRoundTimeout: 30 s
	var killedAt time.Time
	var once sync.Once
	kill := func(step int) {
		if step == 5 {
			once.Do(func() {
				killedAt = time.Now()
				c.Kill(1)
			})
		}
	}
	var failedAt time.Time
	_, _, errs := decode(loadTP(t, f, []uint64{1, 1}), []model.AllReducer{noteFail{gs[0], &failedAt}, gs[1]}, []int{1}, 200, nil, kill)
	if killedAt.IsZero() {
		t.Fatal("the decode ended before step 5")
	}
	if !errors.Is(errs[0], allreduce.ErrGroupFailed) {
		t.Fatalf("member 0 after its peer died: %v, want ErrGroupFailed", errs[0])
	}
	took := failedAt.Sub(killedAt)
	t.Logf("member 0 failed %v after member 1's host closed: %v", took, errs[0])
	if took > 10*time.Second {
		t.Errorf("member 0 failed %v after its peer died (bound 10 s; the round timeout is 30 s)", took)
	}
	// The group stays failed.
	if err := gs[0].AllReduce(context.Background(), []float32{1}); !errors.Is(err, allreduce.ErrGroupFailed) {
		t.Errorf("a failed group's next round: %v", err)
	}
}

// TestGroupCloseStopsRound: closing a group stops its member's round that
// waits for a peer (through a ring: a receive parked on it), promptly and
// with ErrGroupClosed; the peer's rounds then fail.
func TestGroupCloseStopsRound(t *testing.T) {
	c := peerstest.New(t, 2)
	for _, shm := range []bool{false, true} {
		gs := formGroup(t, c.Nodes, allreduce.Options{Shm: shm})
		done := make(chan error, 1)
		go func() { done <- gs[0].AllReduce(context.Background(), []float32{1, 2, 3}) }()
		time.Sleep(50 * time.Millisecond) // past the spin: the round sleeps on the ring
		start := time.Now()
		gs[0].Close()
		select {
		case err := <-done:
			if !errors.Is(err, allreduce.ErrGroupClosed) {
				t.Errorf("shm %v: the round after Close: %v, want ErrGroupClosed", shm, err)
			}
			t.Logf("shm %v: the round stopped %v after Close", shm, time.Since(start))
		case <-time.After(10 * time.Second):
			t.Fatalf("shm %v: the round still waits 10 s after Close (the round timeout is 30 s)", shm)
		}
		// The peer may still finish round 0 (member 0 sent its partial
		// before it closed); round 1 has no partner.
		var err error
		for round := 0; round < 2 && err == nil; round++ {
			err = gs[1].AllReduce(context.Background(), []float32{1, 2, 3})
		}
		if !errors.Is(err, allreduce.ErrGroupFailed) {
			t.Errorf("shm %v: the peer's rounds after the group closed: %v, want ErrGroupFailed", shm, err)
		}
	}
}

type noteFail struct {
	g  *allreduce.Group
	at *time.Time
}

func (n noteFail) AllReduce(ctx context.Context, buf []float32) error {
	err := n.g.AllReduce(ctx, buf)
	if err != nil && n.at.IsZero() {
		*n.at = time.Now()
	}
	return err
}

// TestGroupSums: every member of 2-, 3- and 4-member groups gets the sum
// in member order, bit-identical across members, over several rounds of
// different lengths; a member whose context ends stops the round.
func TestGroupSums(t *testing.T) {
	c := peerstest.New(t, 4)
	for _, shm := range []bool{false, true} {
		for _, n := range []int{2, 3, 4} {
			for _, wire := range []allreduce.Wire{allreduce.WireF32, allreduce.WireF16, allreduce.WireQ8_0} {
				gs := formGroup(t, c.Nodes[:n], allreduce.Options{Wire: wire, Shm: shm})
				for round, size := range []int{1, 31, 33, 1000, 300000} {
					bufs := make([][]float32, n)
					for i := range bufs {
						bufs[i] = make([]float32, size)
						for j := range bufs[i] {
							bufs[i][j] = float32(math.Sin(float64(j*(i+1)+round))) * float32(i+1)
						}
					}
					want := make([]float32, size)
					for i := range bufs { // the exact sum, in member order
						for j, v := range bufs[i] {
							want[j] += v
						}
					}
					errs := make([]error, n)
					var wg sync.WaitGroup
					for i := range gs {
						wg.Add(1)
						go func() { defer wg.Done(); errs[i] = gs[i].AllReduce(context.Background(), bufs[i]) }()
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						t.Fatalf("%d members, %s, shm %v, %d values: %v", n, wire, shm, size, err)
					}
					tol := map[allreduce.Wire]float64{allreduce.WireF32: 0, allreduce.WireF16: 2e-3, allreduce.WireQ8_0: 2e-2}[wire] * float64(n)
					for j := range want {
						if d := math.Abs(float64(bufs[0][j] - want[j])); d > tol {
							t.Fatalf("%d members, %s, %d values: [%d] = %v, want %v", n, wire, size, j, bufs[0][j], want[j])
						}
						for i := 1; i < n; i++ {
							if math.Float32bits(bufs[i][j]) != math.Float32bits(bufs[0][j]) {
								t.Fatalf("%d members, %s: member %d's [%d] = %v, member 0's %v", n, wire, i, j, bufs[i][j], bufs[0][j])
							}
						}
					}
				}
			}
		}
	}
	// A lone member's context ends while its peer never calls: the round
	// stops with the context's error.
	gs := formGroup(t, c.Nodes[:2], allreduce.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := gs[0].AllReduce(ctx, []float32{1, 2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a round no peer joins, under a 100 ms context: %v", err)
	}
}

// TestGroupRefusesBadInput: a stream that claims another member's place,
// a different wire or an unknown group is refused; frames with a wrong
// round, a wrong or oversized length, a NaN, or cut short fail the round
// with an error (never a panic), promptly.
func TestGroupRefusesBadInput(t *testing.T) {
	c := peerstest.New(t, 3)
	a, b, x := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	id := allreduce.NewGroupID()
	members := []peer.ID{a.ID(), b.ID()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	joined := make(chan *allreduce.Group, 1)
	go func() {
		g, err := a.AllReduce().Join(ctx, id, members, allreduce.Options{})
		if err != nil {
			t.Error(err)
		}
		joined <- g
	}()
	hello := func(from *peers.Node, id allreduce.GroupID, count, idx int, wire allreduce.Wire, retry bool) byte {
		t.Helper()
		for {
			s, err := from.Host().NewStream(ctx, a.ID(), allreduce.Protocol)
			if err != nil {
				t.Fatal(err)
			}
			s.Write(append(id[:], byte(count), byte(idx), byte(wire), 0)) // 0: no ring offered
			var st [1]byte
			_, err = s.Read(st[:])
			s.Reset()
			if err != nil {
				t.Fatalf("hello: %v", err)
			}
			if st[0] != 1 || !retry { // 1: group unknown (member 0 has not formed it yet): ask again
				return st[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		name string
		from *peers.Node
		id   allreduce.GroupID
		idx  int
		wire allreduce.Wire
		want byte
	}{
		{"unknown group", b, allreduce.NewGroupID(), 1, allreduce.WireF32, 1},
		{"claims member 0's place", b, id, 0, allreduce.WireF32, 2},
		{"a non-member claims member 1's place", x, id, 1, allreduce.WireF32, 2},
		{"another wire", b, id, 1, allreduce.WireF16, 2},
	} {
		if got := hello(tc.from, tc.id, 2, tc.idx, tc.wire, tc.id == id); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	gb, err := b.AllReduce().Join(ctx, id, members, allreduce.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ga := <-joined
	if ga == nil {
		t.Fatal("member 0 did not join")
	}
	gb.Close()
	ga.Close()

	frame := func(round uint64, count int, vals ...float32) []byte {
		out := binary.LittleEndian.AppendUint64(nil, round)
		out = binary.LittleEndian.AppendUint32(out, uint32(count))
		for _, v := range vals {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"wrong round", frame(1, 2, 1, 2), "expected round 0"},
		{"wrong length", frame(0, 3, 1, 2, 3), "sent 3 values"},
		{"oversized", frame(0, allreduce.MaxValues+1), "values (1 to"},
		{"zero values", frame(0, 0), "values (1 to"},
		{"NaN", frame(0, 2, 1, float32(math.NaN())), "is NaN"},
		{"infinity", frame(0, 2, float32(math.Inf(1)), 1), "is +Inf"},
		{"cut short", frame(0, 2, 1)[:14], "member 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := formGroup(t, []*peers.Node{a, b}, allreduce.Options{})
			s := allreduce.GroupOut(gs[1], 0)
			if _, err := s.Write(tc.raw); err != nil {
				t.Fatal(err)
			}
			if tc.name == "cut short" {
				s.Close()
			}
			start := time.Now()
			err := gs[0].AllReduce(ctx, []float32{5, 6})
			if !errors.Is(err, allreduce.ErrGroupFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AllReduce after %q: %v, want ErrGroupFailed saying %q", tc.name, err, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// BenchmarkGroupAllReduce: one round between 2 members on loopback, of a
// tinyllama-sized hidden state (2048 values, one token) and of a 16-token
// prefill chunk, per wire format, and in F32 through shared memory.
func BenchmarkGroupAllReduce(b *testing.B) {
	c := peerstest.New(b, 2)
	for _, size := range []int{2048, 16 * 2048} {
		for _, tc := range []struct {
			wire allreduce.Wire
			shm  bool
		}{{allreduce.WireF32, false}, {allreduce.WireF16, false}, {allreduce.WireQ8_0, false}, {allreduce.WireF32, true}} {
			wire := tc.wire
			name := fmt.Sprintf("%d/%s", size, wire)
			if tc.shm {
				name += "/shm"
			}
			b.Run(name, func(b *testing.B) {
				gs := formGroup(b, c.Nodes, allreduce.Options{Wire: wire, Shm: tc.shm})
				bufs := [][]float32{make([]float32, size), make([]float32, size)}
				b.SetBytes(int64(4 * size))
				b.ReportAllocs()
				done := make(chan error)
				go func() {
					var err error
					for range b.N {
						if err = gs[1].AllReduce(context.Background(), bufs[1]); err != nil {
							break
						}
					}
					done <- err
				}()
				for range b.N {
					if err := gs[0].AllReduce(context.Background(), bufs[0]); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
