package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"strata/internal/membw"
	"strata/peers/allreduce"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/tensor"
)

func benchTPCmd() *cobra.Command {
	var (
		modelPath               string
		members, threads        int
		promptTokens, genTokens int
		rounds                  int
		weightList, transport   string
		wire                    string
		procs                   bool
	)
	cmd := &cobra.Command{
		Use:   "tp --model FILE [--members 2] [--threads 1] [--gen-tokens 64] [--rounds 3]",
		Short: "Measure tensor-parallel decode in one process against one node with the same threads",
		Long: `bench tp splits every layer of a model (llama, qwen2, qwen3, qwen3moe) across
--members tensor-parallel members, each its own goroutine with --threads
worker threads, all-reducing in-process (goroutines and channels: what
the layer split and the two all-reduces per layer cost, without a
network), and decodes --gen-tokens greedily. In the same run, alternating,
it decodes with one node of members×threads threads (the same cores) and
one node of --threads threads, and reports the best of --rounds for each,
the ratios, and whether the group's greedy tokens equal one node's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" {
				return fmt.Errorf("--model is required (a path to a .gguf file)")
			}
			if members < 1 || threads < 1 || promptTokens < 1 || genTokens < 1 || rounds < 1 {
				return fmt.Errorf("--members, --threads, --prompt-tokens, --gen-tokens and --rounds must be at least 1")
			}
			weights := make([]uint64, members)
			for i := range weights {
				weights[i] = 1
			}
			if weightList != "" {
				parts := strings.Split(weightList, ",")
				if len(parts) != members {
					return fmt.Errorf("--weights has %d entries for %d members", len(parts), members)
				}
				for i, p := range parts {
					w, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
					if err != nil || w == 0 {
						return fmt.Errorf("--weights: %q is not a positive integer", p)
					}
					weights[i] = w
				}
			}
			f, err := gguf.Open(modelPath)
			if err != nil {
				return err
			}
			defer f.Close()
			if transport != "chan" && transport != "tcp" && transport != "libp2p" && transport != "shm" {
				return fmt.Errorf("--transport %q: chan, tcp, libp2p or shm", transport)
			}
			w, err := allreduce.ParseWire(wire)
			if err != nil {
				return err
			}
			if w != allreduce.WireF32 && transport != "libp2p" && transport != "shm" {
				return fmt.Errorf("--wire %s needs --transport libp2p or shm", w)
			}
			if procs && transport != "libp2p" && transport != "shm" {
				return fmt.Errorf("--procs needs --transport libp2p or shm")
			}
			return benchTP(cmd, f, weights, threads, promptTokens, genTokens, rounds, transport, w, procs)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelPath, "model", "", "path to a GGUF model (llama, qwen2, qwen3, qwen3moe)")
	fl.IntVar(&members, "members", 2, "tensor-parallel members")
	fl.IntVar(&threads, "threads", 1, "worker threads per member")
	fl.IntVar(&promptTokens, "prompt-tokens", 16, "prompt tokens, processed as one batch before decoding")
	fl.IntVar(&genTokens, "gen-tokens", 64, "tokens to generate, timed")
	fl.IntVar(&rounds, "rounds", 3, "alternating rounds; the best of each is reported")
	fl.StringVar(&weightList, "weights", "", "members' relative shares, e.g. 2,1 (default equal)")
	fl.StringVar(&transport, "transport", "chan", "all-reduce between members: chan (goroutines and channels), tcp (loopback sockets), libp2p (strata nodes on loopback, the cluster's all-reduce protocol) or shm (the same through shared-memory rings)")
	fl.StringVar(&wire, "wire", "f32", "partial sums on the wire (libp2p, shm): f32, f16 or q8_0")
	fl.BoolVar(&procs, "procs", false, "run each member as a process of its own, as strata nodes are (libp2p, shm)")
	cmd.AddCommand(benchTPMemberCmd())
	return cmd
}

func benchTP(cmd *cobra.Command, f *gguf.File, weights []uint64, threads, promptTokens, genTokens, rounds int, transport string, wire allreduce.Wire, procs bool) error {
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return err
	}
	whole, err := model.Load(f, 0, c.Layers)
	if err != nil {
		return err
	}
	u, err := model.TPUnitsOf(f, c, 0, c.Layers)
	if err != nil {
		return err
	}
	slices, err := model.PlanTP(c, whole.Vocab, u, weights)
	if err != nil {
		return err
	}
	var parts []*model.TPModel
	for _, s := range slices {
		if procs { // each member process loads its own
			break
		}
		m, err := model.LoadTP(f, 0, c.Layers, s)
		if err != nil {
			return err
		}
		parts = append(parts, m)
	}
	prompt := make([]int, promptTokens)
	for i := range prompt {
		prompt[i] = 3 + (i*7919)%max(1, whole.Vocab-3)
	}
	n := len(slices)
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "model      %s (%s kernels)\n%s", f.Paths()[0], tensor.Kernels(), model.DescribeTP(c, slices))
	var pg *procGroup
	if procs {
		if pg, err = startProcGroup(f.Paths()[0], slices, threads, prompt, genTokens, transport, wire); err != nil {
			return err
		}
		defer pg.close()
	}
	load0 := loadAvg()
	var bestTP, bestWide, bestOne tpRun
	for r := 0; r < rounds; r++ {
		var tp tpRun
		if pg != nil {
			tp, err = pg.decode()
		} else {
			tp, err = decodeTP(parts, threads, prompt, genTokens, transport, wire)
		}
		if err != nil {
			return err
		}
		wide, err := decodeOne(whole, n*threads, prompt, genTokens)
		if err != nil {
			return err
		}
		one, err := decodeOne(whole, threads, prompt, genTokens)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "round %d    TP %.2f tok/s (%v CPU/token), 1 node × %d threads %.2f tok/s (%v), 1 node × %d threads %.2f tok/s (%v)\n",
			r+1, tp.tokPerS, tp.cpu.Round(10*time.Microsecond), n*threads, wide.tokPerS, wide.cpu.Round(10*time.Microsecond), threads, one.tokPerS, one.cpu.Round(10*time.Microsecond))
		bestTP, bestWide, bestOne = better(bestTP, tp), better(bestWide, wide), better(bestOne, one)
	}
	fmt.Fprintf(out, "best of %d rounds, %d tokens decoded after a %d-token prompt (load average %s before, %s after: other work on these cores skews the ratios):\n",
		rounds, genTokens, promptTokens, load0, loadAvg())
	over := transport
	if transport == "libp2p" || transport == "shm" {
		over += " (" + wire.String() + " on the wire)"
	}
	a := bestTP.ar
	who := "members"
	if procs {
		who = "member processes"
	}
	fmt.Fprintf(out, "  TP %d %s × %d thread(s), all-reduce over %s: %.2f tok/s (all-reduces: %.2f ms/token on member 0, waiting included)\n",
		n, who, threads, over, bestTP.tokPerS, ms(a.wait0))
	fmt.Fprintf(out, "    in all-reduce per token, mean of members: %.2f ms = %.2f ms waiting for the last member to arrive + %.2f ms exchanging (%d all-reduces; exchange p50 %.1f µs, p90 %.1f µs, p99 %.1f µs)\n",
		ms(a.wait), ms(a.skew), ms(a.exchange), a.calls/genTokens, us(a.p50), us(a.p90), us(a.p99))
	fmt.Fprintf(out, "  1 node × %d thread(s): %.2f tok/s -> TP is %.2fx of it (same cores)\n", n*threads, bestWide.tokPerS, bestTP.tokPerS/bestWide.tokPerS)
	fmt.Fprintf(out, "  1 node × %d thread(s): %.2f tok/s -> TP is %.2fx of it\n", threads, bestOne.tokPerS, bestTP.tokPerS/bestOne.tokPerS)
	same := 0
	for same < len(bestTP.tokens) && same < len(bestOne.tokens) && bestTP.tokens[same] == bestOne.tokens[same] {
		same++
	}
	if same == len(bestOne.tokens) {
		fmt.Fprintf(out, "  greedy tokens: the group's %d equal one node's\n", same)
	} else {
		l := bestOne.logits[same]
		var scale float64
		for _, v := range l {
			scale = max(scale, math.Abs(float64(v)))
		}
		a, b := bestOne.tokens[same], bestTP.tokens[same]
		fmt.Fprintf(out, "  greedy tokens: the group's first %d equal one node's; token %d is %d, one node's %d (one node's logits for them %.5g, %.5g: a margin of %.1e of the largest, summation order decides such near ties)\n",
			same, same, b, a, l[b], l[a], (float64(l[a])-float64(l[b]))/scale)
	}
	return nil
}

// loadAvg is the host's 1-minute load average ("?" where unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
func us(d time.Duration) float64 { return d.Seconds() * 1e6 }

type tpRun struct {
	tokPerS float64
	cpu     time.Duration // process CPU time per generated token
	ar      arStats
	tokens  []int
	logits  [][]float32 // one node's, per generated token
}

func better(a, b tpRun) tpRun {
	if b.tokPerS > a.tokPerS {
		return b
	}
	return a
}

// decodeOne decodes greedily with the whole model on one pool of threads.
func decodeOne(m *model.Model, threads int, prompt []int, gen int) (tpRun, error) {
	pool := tensor.NewPool(threads)
	defer pool.Close()
	capacity := len(prompt) + gen + 1
	s, c := m.NewState(pool, len(prompt), capacity), m.NewCache(capacity)
	var r tpRun
	tokens := prompt
	var start time.Time
	var cpu0 time.Duration
	for i := 0; i <= gen; i++ {
		if i == 1 { // the prompt's batch is not timed
			start, cpu0 = time.Now(), membw.CPUTime()
		}
		if err := s.Embed(tokens); err != nil {
			return r, err
		}
		if err := s.Forward(c, len(tokens)); err != nil {
			return r, err
		}
		l, err := s.LogitsOf(len(tokens) - 1)
		if err != nil {
			return r, err
		}
		if i < gen {
			r.tokens = append(r.tokens, sample.Greedy(l))
			r.logits = append(r.logits, append([]float32(nil), l...))
			tokens = r.tokens[len(r.tokens)-1:]
		}
	}
	r.tokPerS = float64(gen) / time.Since(start).Seconds()
	r.cpu = (membw.CPUTime() - cpu0) / time.Duration(gen)
	return r, nil
}

// timedReducer records when each AllReduce of the timed tokens began and
// returned (wall clock in ns: comparable between members, also between
// processes on one host), so that waiting can be split into waiting for
// the slowest member to arrive and the exchange itself.
type timedReducer struct {
	model.AllReducer
	on          bool
	enter, exit []int64
}

func (t *timedReducer) AllReduce(ctx context.Context, buf []float32) error {
	if !t.on {
		return t.AllReducer.AllReduce(ctx, buf)
	}
	t.enter = append(t.enter, time.Now().UnixNano())
	err := t.AllReducer.AllReduce(ctx, buf)
	t.exit = append(t.exit, time.Now().UnixNano())
	return err
}

// arStats splits the members' time in AllReduce over the timed tokens.
type arStats struct {
	calls int
	// Per token, mean over members: all time inside AllReduce; the part
	// of it before the last member arrived (imbalance: some member was
	// still computing); the rest (the exchange: sends, wake-ups, sums).
	wait, skew, exchange time.Duration
	// Member 0's time in AllReduce per token.
	wait0 time.Duration
	// The exchange of one round (last arrival to return), over rounds and
	// members.
	p50, p90, p99 time.Duration
}

func allReduceStats(timed [][2][]int64, tokens int) arStats {
	var st arStats
	if len(timed) == 0 || tokens == 0 {
		return st
	}
	calls := len(timed[0][0])
	for _, m := range timed {
		calls = min(calls, len(m[0]), len(m[1]))
	}
	st.calls = calls
	var ex []int64
	var wait, skew, exch, wait0 int64
	for k := 0; k < calls; k++ {
		last := int64(0)
		for _, m := range timed {
			last = max(last, m[0][k])
		}
		for i, m := range timed {
			w := m[1][k] - m[0][k]
			wait += w
			if i == 0 {
				wait0 += w
			}
			e := max(0, m[1][k]-last)
			exch += e
			skew += w - e
			ex = append(ex, e)
		}
	}
	per := int64(tokens * len(timed))
	st.wait, st.skew, st.exchange = time.Duration(wait/per), time.Duration(skew/per), time.Duration(exch/per)
	st.wait0 = time.Duration(wait0 / int64(tokens))
	slices.Sort(ex)
	if len(ex) > 0 {
		q := func(f float64) time.Duration { return time.Duration(ex[min(len(ex)-1, int(f*float64(len(ex))))]) }
		st.p50, st.p90, st.p99 = q(0.5), q(0.9), q(0.99)
	}
	return st
}

// decodeTP decodes greedily with the group, each member its own goroutine
// and pool; member 0's tokens are returned (every member has the same).
func decodeTP(parts []*model.TPModel, threads int, prompt []int, gen int, transport string, wire allreduce.Wire) (tpRun, error) {
	ars := model.LocalGroup(len(parts))
	if transport == "libp2p" || transport == "shm" {
		var closeAll func()
		var err error
		if ars, closeAll, err = libp2pGroup(len(parts), wire, transport == "shm"); err != nil {
			return tpRun{}, err
		}
		defer closeAll()
	}
	if transport == "tcp" {
		var closeAll func()
		var err error
		if ars, closeAll, err = tcpGroup(len(parts)); err != nil {
			return tpRun{}, err
		}
		defer closeAll()
	}
	timed := make([]*timedReducer, len(parts))
	runs := make([]memberRun, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	cpu0 := membw.CPUTime()
	for i, m := range parts {
		timed[i] = &timedReducer{AllReducer: ars[i]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = decodeMember(context.Background(), m, threads, prompt, gen, timed[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return tpRun{}, fmt.Errorf("member %d: %w", i, err)
		}
	}
	return groupRun(runs, gen, membw.CPUTime()-cpu0), nil
}

// memberRun is what one member measured of one decode: its greedy tokens,
// when its timed tokens began and ended, and when each of their
// all-reduces began and returned (wall clock, ns).
type memberRun struct {
	Tokens []int   `json:"tokens"`
	Start  int64   `json:"start_ns"`
	End    int64   `json:"end_ns"`
	CPU    int64   `json:"cpu_ns"` // the member's process, when it has its own
	Enter  []int64 `json:"enter_ns,omitempty"`
	Exit   []int64 `json:"exit_ns,omitempty"`
}

// decodeMember is one member's side of a greedy decode: the prompt as one
// batch (not timed), then gen tokens, all-reducing through ar.
func decodeMember(ctx context.Context, m *model.TPModel, threads int, prompt []int, gen int, ar *timedReducer) (memberRun, error) {
	var r memberRun
	pool := tensor.NewPool(threads)
	defer pool.Close()
	capacity := len(prompt) + gen + 1
	s, c := m.NewState(pool, len(prompt), capacity), m.NewCache(capacity)
	calls := gen * (2*len(m.Blocks) + 1)
	ar.on, ar.enter, ar.exit = false, make([]int64, 0, calls), make([]int64, 0, calls)
	tokens := prompt
	for step := 0; step <= gen; step++ {
		if step == 1 { // the prompt's batch is not timed
			ar.on = true
			r.Start = time.Now().UnixNano()
		}
		if err := s.Embed(tokens); err != nil {
			return r, err
		}
		if err := s.Forward(ctx, c, len(tokens), ar); err != nil {
			return r, err
		}
		l, err := s.LogitsOf(ctx, len(tokens)-1, ar)
		if err != nil {
			return r, err
		}
		if step < gen {
			r.Tokens = append(r.Tokens, sample.Greedy(l))
			tokens = r.Tokens[len(r.Tokens)-1:]
		}
	}
	r.End = time.Now().UnixNano()
	ar.on = false
	r.Enter, r.Exit = ar.enter, ar.exit
	return r, nil
}

// groupRun sums up the members' runs of one decode: tokens/s from the
// first member's start to the last one's end, member 0's tokens (every
// member has the same), cpu (of all members) per token.
func groupRun(runs []memberRun, gen int, cpu time.Duration) tpRun {
	start, end := runs[0].Start, runs[0].End
	var marks [][2][]int64
	for _, m := range runs {
		start, end = min(start, m.Start), max(end, m.End)
		marks = append(marks, [2][]int64{m.Enter, m.Exit})
	}
	return tpRun{
		tokPerS: float64(gen) / time.Duration(end-start).Seconds(),
		cpu:     cpu / time.Duration(gen),
		tokens:  runs[0].Tokens,
		ar:      allReduceStats(marks, gen),
	}
}

// tcpGroup connects n in-process members pairwise over loopback TCP: each
// all-reduce sends every member's buffer to every other through the
// kernel's network stack, as members on different hosts would (without
// the wire's latency). For bench tp --transport tcp only.
func tcpGroup(n int) ([]model.AllReducer, func(), error) {
	conns := make([][]net.Conn, n) // conns[i][j]: member i's end towards j
	for i := range conns {
		conns[i] = make([]net.Conn, n)
	}
	var all []net.Conn
	closeAll := func() {
		for _, c := range all {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			accepted := make(chan net.Conn, 1)
			go func() {
				c, _ := ln.Accept()
				accepted <- c
			}()
			a, err := net.Dial("tcp", ln.Addr().String())
			b := <-accepted
			ln.Close()
			if err != nil || b == nil {
				closeAll()
				return nil, nil, fmt.Errorf("loopback connection: %v", err)
			}
			a.(*net.TCPConn).SetNoDelay(true)
			b.(*net.TCPConn).SetNoDelay(true)
			conns[i][j], conns[j][i] = a, b
			all = append(all, a, b)
		}
	}
	out := make([]model.AllReducer, n)
	for i := range out {
		out[i] = &tcpMember{id: i, conns: conns[i]}
	}
	return out, closeAll, nil
}

type tcpMember struct {
	id    int
	conns []net.Conn
	send  []byte
	recv  [][]byte
	got   [][]float32
}

// AllReduce sends buf to every peer (in the background, so two members
// writing large buffers at each other cannot both block), reads every
// peer's, and sums all of them in member order.
func (m *tcpMember) AllReduce(ctx context.Context, buf []float32) error {
	n := len(m.conns)
	if len(m.send) != 4*len(buf) {
		m.send = make([]byte, 4*len(buf))
		m.recv = make([][]byte, n)
		m.got = make([][]float32, n)
		for j := range m.recv {
			m.recv[j] = make([]byte, 4*len(buf))
			m.got[j] = make([]float32, len(buf))
		}
	}
	for i, v := range buf {
		binary.LittleEndian.PutUint32(m.send[4*i:], math.Float32bits(v))
	}
	errc := make(chan error, n)
	for j, c := range m.conns {
		if j != m.id {
			go func() { _, err := c.Write(m.send); errc <- err }()
		}
	}
	for j, c := range m.conns {
		if j == m.id {
			continue
		}
		if _, err := io.ReadFull(c, m.recv[j]); err != nil {
			return err
		}
		for i := range m.got[j] {
			m.got[j][i] = math.Float32frombits(binary.LittleEndian.Uint32(m.recv[j][4*i:]))
		}
	}
	for j := range m.conns {
		if j != m.id {
			if err := <-errc; err != nil {
				return err
			}
		}
	}
	copy(m.got[m.id], buf)
	copy(buf, m.got[0])
	for _, g := range m.got[1:] {
		tensor.Add(buf, g)
	}
	return nil
}
