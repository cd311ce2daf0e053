package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config is one soak run.
type Config struct {
	Bin      string        // the strata binary
	Model    string        // path of stories260K.gguf
	Dir      string        // where the nodes' data directories and logs go
	Nodes    int           // cluster nodes (4)
	Clients  int           // concurrent clients (6)
	Duration time.Duration // of traffic
	Seed     uint64
	// FaultEvery: a fault starts at a random time between Min and Max
	// after the cluster recovered from the last one.
	FaultMin, FaultMax time.Duration
	// Warmup: traffic runs this long before the first fault; then the
	// clients pause, the nodes go idle (and give freed memory back), and
	// each node's memory baseline is taken. The end is measured the same
	// way, idle, after the traffic.
	Warmup time.Duration
	// Settle: faults run this long after the warm-up before the baseline
	// the memory invariant holds a node to is taken (at the first fault's
	// end past it, idle, as a checkpoint): the level a process keeps once
	// it has run its recoveries, a re-plan's other shard and the code
	// they page in, not the level of a process that has seen no fault
	// (measured: such a node settles 4-6 MB higher after the first faults
	// and stays there; docs/performance.md#soak). The sample after the
	// warm-up stays in the report (RSSGrowthFromWarmupPct). 0 = the
	// baseline is the sample after the warm-up.
	Settle time.Duration
	// Checkpoint: every this long after the baseline (at the first fault's
	// end past it) the clients pause and memory is sampled idle again, so
	// the report shows a curve (a leak climbs, a level stays); 0 = none.
	Checkpoint time.Duration
	Log        io.Writer // progress lines; nil = none
	// Network: "netns" puts every node in a network namespace of its own
	// (root only; netLayout) and adds link cuts to the faults; "loopback"
	// runs them side by side on 127.0.0.1; "auto" (or "") is netns when
	// run as root.
	Network string
	// LinkRate is the tc tbf rate of each member's cluster link (netns).
	LinkRate string
	// Faults are the kinds drawn from (hostFaults, netnsFaults); none =
	// all that the network allows.
	Faults []string
}

// The fault kinds (cluster.inject): those any run can do, and those that
// need the nodes in network namespaces.
var (
	hostFaults  = []string{"kill", "stop", "leave", "disk"}
	netnsFaults = []string{"cut", "split"}
)

// Report is what the run found; its JSON is the last line scripts read.
type Report struct {
	Seed      uint64  `json:"seed"`
	Seconds   float64 `json:"duration_s"`
	Nodes     int     `json:"nodes"`
	Clients   int     `json:"clients"`
	Requests  int     `json:"requests"`
	Answered  int     `json:"answered"`
	Refused   int     `json:"refused"`   // clear 429/503 or "cannot place": counted apart, not lost
	Cancelled int     `json:"cancelled"` // clients that hung up on purpose
	Lost      int     `json:"lost"`      // any other failure
	// OriginKilled are streams cut because the node the client talked to
	// was SIGKILLed mid-answer: no other node can finish an HTTP answer
	// that process was writing. Counted apart from lost.
	OriginKilled int            `json:"origin_killed"`
	Wrong        int            `json:"wrong"` // answered, but not as the one-node reference
	Leaked       int            `json:"leaked_sessions"`
	Faults       map[string]int `json:"faults"`
	ByKind       map[string]int `json:"requests_by_kind"`
	// RSSGrowthPct is the largest growth of a node's resident memory from
	// its idle baseline (after the warm-up, and Config.Settle of faults) to
	// its idle end (the process may be
	// another by then: a restarted node must settle where it was).
	RSSGrowthPct float64 `json:"rss_growth_pct"`
	// BaselineS is when the baseline was sampled, seconds since the start;
	// RSSGrowthFromWarmupPct is the growth from the sample after the
	// warm-up, before any fault (the same as RSSGrowthPct without
	// Config.Settle), and RSSWarmupMB those samples.
	BaselineS              float64            `json:"baseline_s"`
	RSSGrowthFromWarmupPct float64            `json:"rss_growth_from_warmup_pct"`
	RSSWarmupMB            map[string]float64 `json:"rss_warmup_mb"`
	// RSSMB is each node's resident memory at its baseline and at the
	// end, MB; MemoryMB splits it (memoryParts) so that growth can be
	// told apart: the Go heap in use, heap the runtime keeps without
	// using, goroutine stacks, KV caches (in the heap), and the kernel's
	// anonymous / file-backed / shared-memory resident pages.
	RSSMB map[string][2]float64 `json:"rss_mb"`
	// Checkpoints: idle samples between the baseline and the end
	// (Config.Checkpoint), each with its time since the start.
	Checkpoints []Checkpoint                     `json:"checkpoints,omitempty"`
	MemoryMB    map[string]map[string][2]float64 `json:"memory_mb"`
	// Shards is each node's loaded shards at its baseline and at the end
	// (strata_shards: idle ones of earlier plans included).
	Shards          map[string][2]int `json:"shards"`
	GoroutineGrowth int               `json:"goroutine_growth"`
	OpenFilesGrowth int               `json:"open_files_growth"`
	IdleCPU         float64           `json:"idle_cpu_max"` // CPU seconds per second of the busiest node once traffic stopped
	TTFTP50         float64           `json:"ttft_ms_p50"`  // first streamed chunk (or whole answer), ms
	TTFTP99         float64           `json:"ttft_ms_p99"`
	// GapP50/99: the longest pause within a stream, of streams that saw a
	// fault begin: what a recovery costs a client.
	GapP50        float64  `json:"recovery_gap_ms_p50"`
	GapP99        float64  `json:"recovery_gap_ms_p99"`
	ConvergeMaxMS float64  `json:"converge_max_ms"`
	Unconverged   int      `json:"unconverged"`        // faults after which the views took longer than ConvergeWithin
	Failures      []string `json:"failures,omitempty"` // the first few lost and wrong requests, in words
	Network       string   `json:"network"`            // netns or loopback
}

// ConvergeWithin is how soon after a fault ends (the node restarted,
// resumed, or its link back) every node's view must hold every node
// again: a restart's start-up and join, or a redial after a cut, and the
// gossip that spreads it.
const ConvergeWithin = 15 * time.Second

// MaxIdleCPU is the most CPU an idle node may burn (seconds per second):
// more is a spin (a worker pool or a retry loop that does not park).
const MaxIdleCPU = 0.2

// OK says the run met the invariants.
func (r Report) OK(maxRSSGrowth float64) bool {
	return r.Lost == 0 && r.Wrong == 0 && r.Leaked == 0 && r.Unconverged == 0 && r.RSSGrowthPct <= maxRSSGrowth && r.Answered > 0 &&
		r.IdleCPU <= MaxIdleCPU
}

// Checkpoint is the nodes' memory sampled idle partway through, MB.
type Checkpoint struct {
	Seconds   float64            `json:"s"`
	RSSMB     map[string]float64 `json:"rss_mb"`
	HeapInuse map[string]float64 `json:"heap_inuse_mb"`
	HeapLive  map[string]float64 `json:"heap_live_mb"`
	Shards    map[string]int     `json:"shards"` // loaded, idle ones of earlier plans included
}

type sample struct {
	rss, goroutines, fds, shards float64
	parts                        map[string]float64
}

// idleSettle is how long a quiet cluster waits once no session is left:
// longer than a node's idle period before it returns memory (10 s, in
// cmd/strata) plus its check interval.
const idleSettle = 15 * time.Second

// memoryParts splits a node's memory, bytes: from its metrics and, on
// Linux, /proc/PID/status (anonymous, file-backed and shared-memory
// resident pages).
func memoryParts(pid int, m map[string]float64) map[string]float64 {
	parts := map[string]float64{
		"heap_inuse":      m["go_memstats_heap_inuse_bytes"],
		"heap_live":       m["go_gc_heap_live_bytes"], // what the node's last collection found live
		"heap_unreturned": m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"],
		"stacks":          m["go_memstats_stack_sys_bytes"],
		"kv":              m["strata_stage_kv_bytes"], // retained prompt caches included
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return parts
	}
	fields := map[string]string{"RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
	for _, line := range strings.Split(string(status), "\n") {
		name, rest, _ := strings.Cut(line, ":")
		var kb float64
		if part, ok := fields[name]; ok {
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err == nil {
				parts[part] = kb * 1024
			}
		}
	}
	return parts
}

// mb rounds bytes to 0.1 MB.
func mb(b float64) float64 { return math.Round(b/1e5) / 10 }

// Run runs the soak and returns its report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "soak: "+format+"\n", args...)
		}
	}
	rep := Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Clients: cfg.Clients, Faults: map[string]int{}, ByKind: map[string]int{}, RSSMB: map[string][2]float64{}, MemoryMB: map[string]map[string][2]float64{}, Shards: map[string][2]int{}}
	models := filepath.Join(cfg.Dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		return rep, err
	}
	if err := os.Symlink(cfg.Model, filepath.Join(models, model+".gguf")); err != nil && !os.IsExist(err) {
		return rep, err
	}

	// The reference: one node alone, with its own secret, never faulted.
	ref, err := newNode(cfg.Dir, "reference", []string{"--models", models, "--context", "512", "--parallel", "8"})
	if err != nil {
		return rep, err
	}
	if err := ref.start(cfg.Bin); err != nil {
		return rep, err
	}
	defer ref.kill()

	c, err := startCluster(cfg, models, logf)
	if err != nil {
		return rep, err
	}
	defer c.close()
	nodes := c.nodes
	rep.Network = "loopback"
	if c.layout != nil {
		rep.Network = "netns"
	}
	kinds := cfg.Faults
	if len(kinds) == 0 {
		kinds = slices.Clone(hostFaults)
		if c.layout != nil {
			kinds = append(kinds, netnsFaults...)
		}
	}
	for _, k := range kinds {
		if !slices.Contains(hostFaults, k) && (!slices.Contains(netnsFaults, k) || c.layout == nil) {
			return rep, fmt.Errorf("fault %q: the kinds are %s and (in network namespaces) %s", k, strings.Join(hostFaults, ", "), strings.Join(netnsFaults, ", "))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	_, err = waitAll(wctx, nodes, cfg.Nodes)
	cancel()
	if err != nil {
		return rep, fmt.Errorf("the cluster did not form: %w", err)
	}
	if _, err := waitAll(ctx, []*node{ref}, 1); err != nil {
		return rep, err
	}
	logf("%d nodes up (seed %d); traffic for %v", cfg.Nodes, cfg.Seed, cfg.Duration)

	// The reference's answers, asked once per distinct request.
	var refMu sync.Mutex
	refAnswers := map[string]string{}
	reference := func(r request) (string, error) {
		refMu.Lock()
		a, ok := refAnswers[r.key()]
		refMu.Unlock()
		if ok {
			return a, nil
		}
		r.cancelAfter = 0
		o := send(ctx, ref, r)
		if o.err != nil {
			return "", fmt.Errorf("the reference node: %w", o.err)
		}
		refMu.Lock()
		refAnswers[r.key()] = o.text
		refMu.Unlock()
		return o.text, nil
	}

	// Memory, idle: clients hold traffic (read side) per request; quiet
	// takes it whole, so no request runs while it waits for the nodes to
	// have no session and settle, and samples them.
	var traffic sync.RWMutex
	quiet := func() (map[string]sample, error) {
		traffic.Lock()
		defer traffic.Unlock()
		if left := waitNoSessions(nodes, 30*time.Second); left > 0 {
			return nil, fmt.Errorf("%d sessions still open with no request running", left)
		}
		time.Sleep(idleSettle)
		out := map[string]sample{}
		for _, n := range nodes {
			m, err := n.metrics()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n.name, err)
			}
			out[n.name] = sample{rss: m["process_resident_memory_bytes"], goroutines: m["go_goroutines"], fds: m["process_open_fds"], shards: m["strata_shards"],
				parts: memoryParts(n.pid(), m)}
		}
		return out, nil
	}

	// Traffic.
	end := time.Now().Add(cfg.Duration)
	start := time.Now()
	var mu sync.Mutex
	var ttfts, gaps []float64
	faulting := make(chan struct{}) // closed and replaced when a fault starts
	record := func(r request, o outcome, sawFault bool, on string) {
		mu.Lock()
		defer mu.Unlock()
		rep.Requests++
		rep.ByKind[r.kind]++
		switch {
		case o.cancelled:
			rep.Cancelled++
		case o.refused:
			rep.Refused++
		case o.err != nil && o.originKilled:
			rep.OriginKilled++
		case o.err != nil:
			rep.Lost++
			if len(rep.Failures) < 10 {
				rep.Failures = append(rep.Failures, fmt.Sprintf("lost %s on %s at %.1fs: %v", r.kind, on, time.Since(start).Seconds(), o.err))
			}
		default:
			rep.Answered++
		}
		if o.ttft > 0 {
			ttfts = append(ttfts, float64(o.ttft.Milliseconds()))
		}
		if sawFault && o.worstGap > 0 {
			gaps = append(gaps, float64(o.worstGap.Milliseconds()))
		}
	}
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)+1))
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				r := newRequest(rng)
				traffic.RLock()
				mu.Lock()
				fc := faulting
				mu.Unlock()
				var o outcome
				on := ""
				// A node that is down or leaving: the client tries the next,
				// as a load balancer would.
				for try := range len(nodes) {
					n := nodes[(rng.IntN(len(nodes))+try)%len(nodes)]
					kills := n.kills.Load()
					on = n.name
					o = send(ctx, n, r)
					o.originKilled = n.kills.Load() != kills
					if !o.refused || isPlacementRefusal(fmt.Sprint(o.err)) {
						break
					}
				}
				sawFault := false
				select {
				case <-fc:
					sawFault = true
				default:
				}
				if o.err == nil && !o.cancelled {
					want, err := reference(r)
					if err != nil {
						o.err = err
					} else if o.text != want {
						mu.Lock()
						rep.Wrong++
						if len(rep.Failures) < 10 {
							rep.Failures = append(rep.Failures, fmt.Sprintf("wrong %s %s:\n got %q\nwant %q", r.kind, r.key(), o.text, want))
						}
						mu.Unlock()
					}
				}
				traffic.RUnlock()
				record(r, o, sawFault, on)
			}
		})
	}

	// Faults, one at a time, each followed by the wait for the view to
	// hold every node again.
	frng := rand.New(rand.NewPCG(cfg.Seed, 0))
	var convergeMax time.Duration
	time.Sleep(min(cfg.Warmup, time.Until(end)))
	warm, err := quiet()
	if err != nil {
		return rep, fmt.Errorf("the sample after warm-up: %w", err)
	}
	baseline, settleAt := warm, time.Now().Add(cfg.Settle)
	rep.BaselineS = time.Since(start).Seconds()
	if cfg.Settle > 0 {
		logf("after %v of warm-up: RSS %s; the baseline comes after %v of faults", cfg.Warmup, rssList(warm), cfg.Settle)
	} else {
		logf("baseline after %v of warm-up: RSS %s", cfg.Warmup, rssList(warm))
	}
	lastCheckpoint := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		if cfg.Settle > 0 && !settleAt.IsZero() && !time.Now().Before(settleAt) {
			if baseline, err = quiet(); err != nil {
				return rep, fmt.Errorf("the baseline after %v of faults: %w", cfg.Settle, err)
			}
			settleAt = time.Time{}
			rep.BaselineS = time.Since(start).Seconds()
			logf("baseline after %v of faults (%.0fs in): RSS %s", cfg.Settle, rep.BaselineS, rssList(baseline))
			lastCheckpoint = time.Now()
		}
		if cfg.Checkpoint > 0 && time.Since(lastCheckpoint) >= cfg.Checkpoint && time.Until(end) > cfg.Checkpoint/2 {
			at := time.Since(start)
			now, err := quiet()
			if err != nil {
				return rep, fmt.Errorf("a checkpoint: %w", err)
			}
			cp := Checkpoint{Seconds: at.Seconds(), RSSMB: map[string]float64{}, HeapInuse: map[string]float64{}, HeapLive: map[string]float64{}, Shards: map[string]int{}}
			for name, v := range now {
				cp.RSSMB[name], cp.HeapInuse[name], cp.HeapLive[name] = mb(v.rss), mb(v.parts["heap_inuse"]), mb(v.parts["heap_live"])
				cp.Shards[name] = int(v.shards)
			}
			rep.Checkpoints = append(rep.Checkpoints, cp)
			logf("checkpoint at %.0fs: RSS %s", at.Seconds(), rssList(now))
			lastCheckpoint = time.Now()
		}
		wait := cfg.FaultMin + time.Duration(frng.Int64N(int64(cfg.FaultMax-cfg.FaultMin)+1))
		time.Sleep(min(wait, time.Until(end)))
		if !time.Now().Before(end) {
			break
		}
		vi := frng.IntN(len(nodes))
		victim := nodes[vi]
		kind := kinds[frng.IntN(len(kinds))]
		mu.Lock()
		close(faulting)
		faulting = make(chan struct{})
		mu.Unlock()
		rep.Faults[kind]++
		what, failure, err := c.inject(kind, vi, frng, cfg.Bin)
		if err != nil {
			return rep, err
		}
		if failure != "" {
			rep.Failures = append(rep.Failures, failure)
		}
		kind = what
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		took, err := waitAll(cctx, nodes, cfg.Nodes)
		cancel()
		if err != nil || took > ConvergeWithin {
			rep.Unconverged++
			rep.Failures = append(rep.Failures, fmt.Sprintf("after %s of %s the views held all %d nodes only %v later (%v allowed)",
				kind, victim.name, cfg.Nodes, took.Round(time.Millisecond), ConvergeWithin))
		}
		convergeMax = max(convergeMax, took)
		logf("%s %s: views whole again %v later (%.0fs in)", kind, victim.name, took.Round(time.Millisecond), time.Since(start).Seconds())
	}
	wg.Wait()
	rep.Seconds = time.Since(start).Seconds()
	rep.ConvergeMaxMS = float64(convergeMax.Milliseconds())

	// After the traffic: no session may be left, on any node.
	rep.Leaked = waitNoSessions(nodes, 30*time.Second)

	// Idle CPU, then memory against the baselines.
	cpu0 := map[string]float64{}
	for _, n := range nodes {
		if m, err := n.metrics(); err == nil {
			cpu0[n.name] = m["process_cpu_seconds_total"]
		}
	}
	const idleWindow = 5 * time.Second
	time.Sleep(idleWindow)
	for _, n := range nodes {
		if m, err := n.metrics(); err == nil {
			rep.IdleCPU = max(rep.IdleCPU, (m["process_cpu_seconds_total"]-cpu0[n.name])/idleWindow.Seconds())
		}
	}
	final, err := quiet()
	if err != nil {
		return rep, fmt.Errorf("the idle end: %w", err)
	}
	logf("idle at the end: RSS %s", rssList(final))
	rep.RSSWarmupMB = map[string]float64{}
	for name, w := range warm {
		rep.RSSWarmupMB[name] = mb(w.rss)
		if e, ok := final[name]; ok && w.rss > 0 {
			rep.RSSGrowthFromWarmupPct = max(rep.RSSGrowthFromWarmupPct, 100*(e.rss-w.rss)/w.rss)
		}
	}
	for name, b := range baseline {
		e, ok := final[name]
		if !ok || b.rss <= 0 {
			continue
		}
		rep.RSSGrowthPct = max(rep.RSSGrowthPct, 100*(e.rss-b.rss)/b.rss)
		rep.RSSMB[name] = [2]float64{mb(b.rss), mb(e.rss)}
		parts := map[string][2]float64{}
		for k, v := range e.parts {
			parts[k] = [2]float64{mb(b.parts[k]), mb(v)}
		}
		rep.MemoryMB[name] = parts
		rep.Shards[name] = [2]int{int(b.shards), int(e.shards)}
		rep.GoroutineGrowth = max(rep.GoroutineGrowth, int(e.goroutines-b.goroutines))
		rep.OpenFilesGrowth = max(rep.OpenFilesGrowth, int(e.fds-b.fds))
	}
	rep.TTFTP50, rep.TTFTP99 = percentile(ttfts, 50), percentile(ttfts, 99)
	rep.GapP50, rep.GapP99 = percentile(gaps, 50), percentile(gaps, 99)
	return rep, nil
}

// cluster is the soak's nodes, in network namespaces (layout) or not.
type cluster struct {
	nodes  []*node
	layout *netLayout
}

// startCluster starts cfg.Nodes nodes. Every node offers 1.7 MB, so
// stories260K with KV for 4 sessions (2.5 MB) needs two of them; any one
// may go.
func startCluster(cfg Config, models string, logf func(string, ...any)) (*cluster, error) {
	first := filepath.Join(cfg.Dir, "n0")
	idOut, err := exec.Command(cfg.Bin, "node", "id", "--data-dir", first).Output()
	if err != nil {
		return nil, fmt.Errorf("node id: %w", err)
	}
	id := strings.TrimSpace(string(idOut))
	common := []string{"--models", models, "--memory", "1700kB", "--context", "512", "--parallel", "4", "--drain-timeout", "30s",
		"--secret-file", filepath.Join(first, "secret")}
	c := &cluster{}
	if cfg.Network == "netns" || (cfg.Network == "" || cfg.Network == "auto") && os.Geteuid() == 0 {
		if c.layout, err = newNetLayout(cfg.LinkRate); err != nil {
			if cfg.Network == "netns" {
				return nil, fmt.Errorf("network namespaces: %w", err)
			}
			logf("no network namespaces (%v): the nodes run on loopback", err)
			c.layout = nil
		} else {
			// Members on different hosts: TCP between them (no shared
			// memory), and an API key (their APIs are not on loopback).
			common = append(common, "--transport", "tcp")
		}
	}
	for i := range cfg.Nodes {
		args := slices.Clone(common)
		if i > 0 {
			args = append(args, "--join", c.nodes[0].peerAddr()+"/p2p/"+id)
		}
		name := fmt.Sprintf("n%d", i)
		var n *node
		if c.layout != nil {
			clusterIP, apiIP, lerr := c.layout.addNode(i)
			if lerr != nil {
				c.close()
				return nil, lerr
			}
			n, err = newNodeAt(cfg.Dir, name, "/ip4/"+clusterIP+"/tcp/7341", apiIP+":8080", "soak-"+id[:16], c.layout.exec(i), args)
		} else {
			n, err = newNode(cfg.Dir, name, args)
		}
		if err == nil {
			c.nodes = append(c.nodes, n)
			err = n.start(cfg.Bin)
		}
		if err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// close kills the nodes and removes the namespaces.
func (c *cluster) close() {
	for _, n := range c.nodes {
		n.kill()
	}
	if c.layout != nil {
		c.layout.close()
	}
}

// inject does one fault of kind to node vi and returns it in words
// ("stop 12s"), a failure to report if the node misbehaved, or an error
// that ends the run (a node that cannot be started again).
func (c *cluster) inject(kind string, vi int, frng *rand.Rand, bin string) (what, failure string, err error) {
	victim := c.nodes[vi]
	switch kind {
	case "kill":
		victim.kills.Add(1)
		victim.signal(syscall.SIGKILL)
		victim.wait(10 * time.Second)
		time.Sleep(time.Duration(1+frng.IntN(4)) * time.Second)
		return kind, "", victim.start(bin)
	case "stop":
		d := time.Duration(1+frng.IntN(30)) * time.Second
		victim.signal(syscall.SIGSTOP)
		time.Sleep(d)
		victim.signal(syscall.SIGCONT)
		return fmt.Sprintf("stop %v", d), "", nil
	case "cut":
		// The member's cluster link goes down (its clients still reach
		// it) and comes back.
		d := time.Duration(1+frng.IntN(30)) * time.Second
		if err := c.layout.setLink(vi, false); err != nil {
			return kind, "", err
		}
		time.Sleep(d)
		return fmt.Sprintf("cut %v", d), "", c.layout.setLink(vi, true)
	case "split":
		// The member and one other cannot reach each other for a while;
		// both reach the rest (a partial partition).
		d := time.Duration(1+frng.IntN(30)) * time.Second
		other := (vi + 1 + frng.IntN(len(c.nodes)-1)) % len(c.nodes)
		if err := c.layout.setPair(vi, other, false); err != nil {
			return kind, "", err
		}
		time.Sleep(d)
		return fmt.Sprintf("split %v from %s", d, c.nodes[other].name), "", c.layout.setPair(vi, other, true)
	case "disk":
		// The member comes back with its disk budget full: no model file
		// of its own and no room to fetch layers (--disk 1KB). It offers
		// memory it cannot fill; the cluster must place the model on the
		// others. After a while it comes back whole.
		d := time.Duration(10+frng.IntN(51)) * time.Second
		failure = victim.leave()
		if err := victim.startWith(bin, append(withoutFlag(victim.args, "--models"), "--disk", "1KB")); err != nil {
			return kind, failure, err
		}
		time.Sleep(d)
		if f := victim.leave(); failure == "" {
			failure = f
		}
		return fmt.Sprintf("disk full %v", d), failure, victim.start(bin)
	case "leave":
		return kind, victim.leave(), victim.start(bin)
	}
	return kind, "", fmt.Errorf("unknown fault %q", kind)
}

// withoutFlag is args less flag and its value.
func withoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// waitNoSessions waits up to d for every node to hold no session (driven
// or staged) and returns how many are left (a node that does not answer
// counts as one).
func waitNoSessions(nodes []*node, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		left := 0
		for _, n := range nodes {
			driven, staged, err := n.sessions()
			if err != nil {
				left++
				continue
			}
			left += driven + staged
		}
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// rssList is the nodes' resident memory, MB, in words.
func rssList(s map[string]sample) string {
	var parts []string
	for name, v := range s {
		parts = append(parts, fmt.Sprintf("%s %.1f MB", name, mb(v.rss)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// JSON is the report's one line.
func (r Report) JSON() string {
	b, _ := json.Marshal(r)
	return string(b)
}
