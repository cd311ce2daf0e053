package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"strata/actors"
	"strata/actors/origin"
	"strata/actors/plan"
	"strata/api"
	"strata/internal/doctor"
	"strata/internal/hfhub"
	"strata/internal/units"
	"strata/messages"
	"strata/peers"
	"strata/peers/allreduce"
	"strata/peers/side"
	"strata/peers/verbs"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
)

func init() { extraCommands = append(extraCommands, nodeCmd) }

// defaultListen is where `strata node` listens for peers unless told.
const defaultListen = "/ip4/0.0.0.0/tcp/7341"

// nodeFlags are the flags of `strata node`.
type nodeFlags struct {
	dataDir, secret, secretFile, memory, models, apiAddr, apiKey string
	configFile, logFormat, logLevel                              string
	disk, transport, verbsFaults, kvType                         string
	speculate                                                    string
	guessEveryStep                                               bool
	gpu                                                          gpuFlags
	gpuMemory                                                    string
	keepAlive                                                    time.Duration
	stores, placement, arWire, memBW, experts                    string
	listen, join, allowedHosts                                   []string
	noMDNS, f16, verbsApple, noShortcut                          bool
	context, parallel, queue, threads, promptCache               int
	stepTimeout, drainTimeout                                    time.Duration
	// Test hooks (hidden flags): a protocol range to announce, and an
	// offset to the clock the node announces, to make strata doctor's
	// checks fail on purpose.
	testProtocol    string
	testClockOffset time.Duration
}

func nodeCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node [--data-dir D] [--listen MULTIADDR] [--join MULTIADDR] [--secret S]",
		Short: "Run a node: join the cluster, hold shards of models, serve the API",
		Long: `node runs this machine as a member of a strata cluster until interrupted.

Nodes find each other on the LAN (mDNS) and through --join addresses, and
only nodes with the same cluster secret can connect. The secret comes from
--secret, --secret-file, $STRATA_SECRET, or DATA_DIR/secret; with none of
them, node creates a random secret in DATA_DIR/secret (mode 0600) and
prints the command another machine runs to join.

Every second the node tells the others its peer ID, addresses, memory
(--memory caps what it offers), the GGUF models in --models and the
shards it holds. Models are found in --models, the Hugging Face cache
(where strata pull puts them), LM Studio's and Ollama's stores (strata
models lists them). Any node takes prompts (strata run --api, strata chat,
the OpenAI API and the dashboard at http://--api/): it plans which nodes
run which layers of the model, and they load those layers on demand.
A model is named by its file name without .gguf (a split model by the
name before -00001-of-0000N.gguf). One node with the model is enough: a
node given layers it lacks fetches exactly their byte ranges from the
peers that hold them (checked against the holder's tensor digests) and
keeps them in DATA_DIR/weights, within --disk; it then serves them to
others too, and strata models lists them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := applyConfig(cmd.Flags(), f.dataDir, f.configFile, os.Getenv); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				stop() // the first signal leaves gracefully; a second one ends the process at once
			}()
			return runNode(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	cmd.PersistentFlags().StringVar(&f.dataDir, "data-dir", defaultDataDir(), "where the node keeps its identity, cluster secret and models")
	fl.StringVar(&f.logFormat, "log-format", "text", "log lines as text (key=value) or json (one object per line)")
	fl.StringVar(&f.logLevel, "log-level", "info", "least severe log lines written: debug, info, warn or error")
	fl.StringVar(&f.configFile, "config", "", "settings file (default DATA_DIR/config.toml when it exists): one name = value per flag; flags, then STRATA_* environment variables, win over it (strata config show)")
	fl.StringArrayVar(&f.listen, "listen", []string{defaultListen}, "multiaddr to listen on for peers (repeatable)")
	fl.StringArrayVar(&f.join, "join", nil, "multiaddr of a node to join, ending in /p2p/PEER_ID (repeatable)")
	fl.StringVar(&f.secret, "secret", "", "cluster secret (default: $STRATA_SECRET, then DATA_DIR/secret)")
	fl.StringVar(&f.secretFile, "secret-file", "", "file holding the cluster secret")
	fl.StringVar(&f.memory, "memory", "", "memory to offer the cluster, e.g. 96GB (default: all of it)")
	fl.StringVar(&f.disk, "disk", "", "disk space for layers fetched from peers (DATA_DIR/weights), e.g. 200GB (default: what it holds plus the free space less a twentieth of the disk, at least 2 GiB, as at start)")
	fl.StringVar(&f.models, "models", "", "directory of GGUF models to announce (default DATA_DIR/models)")
	fl.StringVar(&f.stores, "stores", defaultStores, "other stores to find models in (see strata models --help); \"none\" for only --models")
	fl.StringVar(&f.apiAddr, "api", api.DefaultAddr, "address of the HTTP status API")
	fl.StringVar(&f.apiKey, "api-key", "", "key the API requires (default $STRATA_API_KEY; needed when --api is not loopback)")
	fl.StringSliceVar(&f.allowedHosts, "allowed-host", nil, "host name, besides localhost and IP addresses, that API requests may be addressed to when there is no API key (repeatable)")
	fl.BoolVar(&f.noMDNS, "no-mdns", false, "do not look for peers on the LAN")
	fl.IntVar(&f.context, "context", model.DefaultContext, "KV cache positions per session (at most the model's context length)")
	fl.IntVar(&f.parallel, "parallel", 4, "sessions run at once; placement reserves KV memory for this many")
	fl.IntVar(&f.queue, "queue", 64, "requests that may wait for one of the --parallel slots, first come first served; beyond them a request is refused at once (429 and Retry-After)")
	fl.IntVar(&f.promptCache, "prompt-cache", 0, "finished sessions whose KV caches are kept for prompt caching (a conversation's next turn reuses them; they give way when memory is needed); 0 = 16, -1 = off")
	fl.IntVar(&f.threads, "threads", 0, "worker threads for the kernels (0: all cores)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 2*time.Minute, "on SIGTERM or Ctrl-C, how long to let the answers this node is giving finish before it exits (it takes no new ones, and its shards move to the other nodes at once); a second signal exits at once")
	fl.DurationVar(&f.stepTimeout, "step-timeout", 30*time.Second, "wait for one token before a session leaves out the stages that do not answer and replays")
	fl.StringVar(&f.transport, "transport", peers.TransportAuto, "what activations travel on between nodes: auto (shared memory with nodes on this host, else the libp2p stream), tcp, shm or rdma")
	fl.BoolVar(&f.verbsApple, "verbs-apple", false, "keep shared-memory links to Apple RDMA's constraints (4 KiB frames, equal send/receive sizes, 32 work requests): to test that protocol")
	fl.StringVar(&f.verbsFaults, "verbs-faults", "", "inject a fault into the side channel: KIND@FRAME (drop, truncate, corrupt, reorder, stall), for tests")
	fl.StringVar(&f.testProtocol, "test-protocol", "", "announce this protocol range (MIN-MAX) instead of the build's, for tests")
	fl.DurationVar(&f.testClockOffset, "test-clock-offset", 0, "announce a clock this far off, for tests")
	fl.MarkHidden("test-protocol")
	fl.MarkHidden("test-clock-offset")
	fl.MarkHidden("verbs-apple")
	fl.MarkHidden("verbs-faults")
	fl.StringVar(&f.kvType, "kv-type", "f16", "KV cache type of this node's shards and of its plans: "+model.KVTypes+" (use the same on every node: it rounds the model's output)")
	fl.StringVar(&f.speculate, "speculate", "off", "sessions this node starts guess tokens ahead, checked by the ring's last stage in the same step: off, ngram, or draft:MODEL\n"+
		"(a model name or GGUF path of the same vocabulary, run here); the answers do not change, single answers on a pipeline get faster")
	f.gpu.add(fl)
	fl.DurationVar(&f.keepAlive, "keep-alive", 10*time.Minute, "unload a shard no session has used for this long (its memory goes back; the next plan that needs it loads it again), as Ollama's keep_alive; 0 keeps shards until memory is short")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "auto", "with --gpu, the memory kept for the device's scratch (its buffers beside the weights it reads in place), not offered for shards; a shard whose scratch does not fit stays on the CPU: a size such as 2GB, or auto (1GB, or a twentieth of --memory where that is less)")
	fl.BoolVar(&f.guessEveryStep, "guess-every-step", false, "with --speculate, guess at every step, also where plain steps are measured faster (for measuring speculation itself; n-gram guesses the last stage drafts are never paced)")
	fl.BoolVar(&f.noShortcut, "no-token-shortcut", false, "sessions this node starts send each token to the first stage themselves, not from the last stage (one hop more per token; for comparisons)")
	fl.BoolVar(&f.f16, "f16-activations", false, "send activations between nodes as f16 (half the bytes; output may differ slightly from one node)")
	fl.StringVar(&f.placement, "placement", "pipeline", "how the sessions started here place a model: pipeline (layers split across nodes), auto (the cost model's fastest plan, see strata plan), tp (every layer split across a tensor-parallel group) or hybrid (stages of tensor-parallel groups); use the same on every node")
	fl.StringVar(&f.experts, "experts", "auto", "how the tensor-parallel groups of those plans hold a mixture-of-experts model's routed experts: auto (the cost model's choice per group, see strata plan), split (every expert split by columns across the members) or whole (whole experts per member: expert parallelism); use the same on every node")
	fl.StringVar(&f.arWire, "allreduce-wire", "f32", "what the partial sums of this node's tensor-parallel groups travel as: f32, f16 or q8_0 (use the same on every node)")
	fl.StringVar(&f.memBW, "mem-bandwidth", "", "memory read rate to announce, e.g. 100GB/s (default: measured at start); tensor-parallel slices and the cost model follow it")

	cmd.AddCommand(nodeStopCmd(&f.dataDir))
	cmd.AddCommand(&cobra.Command{
		Use:   "id [--data-dir D]",
		Short: "Print the node's peer ID, creating its identity (and cluster secret) on first use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := peers.LoadOrCreateSecret(f.dataDir); err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			id, err := peers.LoadOrCreateIdentityID(f.dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	})
	return cmd
}

// nodeStopCmd is strata node stop: a graceful leave of the node running
// on this data directory, as SIGTERM does.
func nodeStopCmd(dataDir *string) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "stop [--data-dir D] [--wait 3m]",
		Short: "Stop the node running on this data directory gracefully (as SIGTERM does)",
		Long: `stop signals the node that runs on --data-dir (its process ID is in
DATA_DIR/node.pid) to leave the cluster: it takes no new sessions, its
shards move to the other nodes (their sessions replay there at once), the
answers it is giving finish (within its --drain-timeout), and it exits.
stop waits for that, up to --wait.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(filepath.Join(*dataDir, nodePIDFile))
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no node is running on %s (no %s)", *dataDir, nodePIDFile)
			} else if err != nil {
				return err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				return fmt.Errorf("%s: not a process ID: %q", filepath.Join(*dataDir, nodePIDFile), b)
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("node process %d: %w (a stale %s?)", pid, err, nodePIDFile)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "asked node process %d to leave the cluster\n", pid)
			deadline := time.Now().Add(wait)
			for syscall.Kill(pid, 0) == nil {
				if time.Now().After(deadline) {
					return fmt.Errorf("node process %d still runs after %v", pid, wait)
				}
				time.Sleep(100 * time.Millisecond)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "the node has stopped")
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 3*time.Minute, "how long to wait for the node to exit")
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv("STRATA_DATA_DIR"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".strata")
	}
	return ".strata"
}

// nodeSecret picks the cluster secret: --secret, --secret-file,
// $STRATA_SECRET, DATA_DIR/secret, or a new one (created = true).
func nodeSecret(f nodeFlags) (secret []byte, created bool, source string, err error) {
	switch {
	case f.secret != "" && f.secretFile != "":
		return nil, false, "", errors.New("give --secret or --secret-file, not both")
	case f.secret != "":
		s := []byte(strings.TrimSpace(f.secret))
		if len(s) < peers.MinSecretBytes {
			return nil, false, "", fmt.Errorf("--secret: %w", peers.ErrShortSecret)
		}
		return s, false, "--secret", nil
	case f.secretFile != "":
		s, err := peers.ReadSecretFile(f.secretFile)
		if err != nil {
			return nil, false, "", fmt.Errorf("--secret-file: %w", err)
		}
		return s, false, f.secretFile, nil
	case os.Getenv("STRATA_SECRET") != "":
		s := []byte(strings.TrimSpace(os.Getenv("STRATA_SECRET")))
		if len(s) < peers.MinSecretBytes {
			return nil, false, "", fmt.Errorf("STRATA_SECRET: %w", peers.ErrShortSecret)
		}
		return s, false, "$STRATA_SECRET", nil
	}
	s, created, err := peers.LoadOrCreateSecret(f.dataDir)
	if err != nil {
		return nil, false, "", fmt.Errorf("secret: %w", err)
	}
	return s, created, filepath.Join(f.dataDir, peers.SecretFile), nil
}

func runNode(ctx context.Context, out, errOut io.Writer, f nodeFlags) error {
	if f.apiKey == "" {
		f.apiKey = os.Getenv("STRATA_API_KEY")
	}
	if !api.IsLoopback(f.apiAddr) && f.apiKey == "" {
		return fmt.Errorf("--api %s is not a loopback address: set --api-key (or STRATA_API_KEY)", f.apiAddr)
	}
	if f.keepAlive < 0 || f.keepAlive > 0 && f.keepAlive < time.Second {
		return fmt.Errorf("--keep-alive %v: a duration of a second or more, or 0 for never", f.keepAlive)
	}
	var memCap uint64
	if f.memory != "" {
		var err error
		if memCap, err = units.ParseBytes(f.memory); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
	}
	if f.models == "" { // where strata pull puts models
		f.models = filepath.Join(f.dataDir, "models")
		if err := os.MkdirAll(f.models, 0o755); err != nil {
			return err
		}
	}
	// Check every address before anything starts, for one clear error.
	for _, s := range f.listen {
		if _, err := peers.ParseListen(s); err != nil {
			return fmt.Errorf("--%w", err)
		}
	}
	for _, s := range f.join {
		if _, err := peers.ParseJoin(s); err != nil {
			return fmt.Errorf("--%w", err)
		}
	}
	faults, err := parseVerbsFaults(f.verbsFaults)
	if err != nil {
		return err
	}
	secret, created, source, err := nodeSecret(f)
	if err != nil {
		return err
	}
	if msg, loose := peers.LooseFileMode(source); loose && source != "--secret" && source != "$STRATA_SECRET" {
		fmt.Fprintf(errOut, "warning: the cluster secret is not private: %s\n", msg)
	}
	ln, err := net.Listen("tcp", f.apiAddr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		return fmt.Errorf("--api %s: %v", f.apiAddr, err)
	}
	defer ln.Close()

	if f.parallel < 0 || f.context < 0 || f.queue < 0 {
		return fmt.Errorf("--parallel, --queue and --context must be positive")
	}
	if f.stepTimeout < 0 || f.stepTimeout > 0 && f.stepTimeout < 100*time.Millisecond {
		return fmt.Errorf("--step-timeout %v: at least 100ms (0: the default, 30s)", f.stepTimeout)
	}
	if f.parallel == 0 {
		f.parallel = 4
	}
	if f.context == 0 {
		f.context = model.DefaultContext
	}
	kv, err := model.ParseKVType(f.kvType)
	if err != nil {
		return fmt.Errorf("--kv-type: %w", err)
	}
	if f.placement == "" { // the zero nodeFlags (tests) mean the defaults
		f.placement = "pipeline"
	}
	if f.arWire == "" {
		f.arWire = "f32"
	}
	if f.experts == "" {
		f.experts = "auto"
	}
	experts, err := plan.ParseExpertMode(f.experts)
	if err != nil {
		return fmt.Errorf("--experts: %w", err)
	}
	placement, err := plan.ParseMode(f.placement)
	if err != nil {
		return fmt.Errorf("--placement: %w", err)
	}
	arWire, err := allreduce.ParseWire(f.arWire)
	if err != nil {
		return fmt.Errorf("--allreduce-wire: %w", err)
	}
	var memBW float64
	if f.memBW != "" {
		if memBW, err = plan.ParseRate(f.memBW); err != nil {
			return fmt.Errorf("--mem-bandwidth: %w", err)
		}
	}
	cat, err := (&storeFlags{dataDir: f.dataDir, models: f.models, stores: f.stores}).catalog()
	if err != nil {
		return err
	}
	var diskCap uint64
	if f.disk != "" {
		if diskCap, err = units.ParseBytes(f.disk); err != nil {
			return fmt.Errorf("--disk: %w", err)
		}
	}
	if cat.Partial, err = catalog.OpenStore(filepath.Join(f.dataDir, weightsDir), int64(diskCap)); err != nil {
		return err
	}
	if f.disk == "" {
		// No cap given: what the disk can spare (DefaultBudget), as of now.
		budget, err := catalog.DefaultBudget(cat.Partial.Dir(), cat.Partial.Used())
		if err != nil {
			return err
		}
		cat.Partial.SetBudget(budget)
	}
	specSource, specDraft, err := parseSpeculateFlag(f.speculate, false)
	if err != nil {
		return err
	}
	var draft *engine.Engine
	if specDraft != "" {
		if _, statErr := os.Stat(specDraft); statErr != nil {
			if specDraft, err = cat.Path(specDraft); err != nil {
				return fmt.Errorf("--speculate draft: %w", err)
			}
		}
		if draft, err = engine.Open(specDraft, engine.Options{Threads: f.threads, Context: f.context, KVType: kv, PromptCache: -1}); err != nil {
			return fmt.Errorf("--speculate draft: %w", err)
		}
		defer draft.Close()
	}
	accelerate, closeGPU, device, err := nodeGPU(f.gpu, errOut)
	if err != nil {
		return err
	}
	defer closeGPU()
	var deviceBytes uint64
	if accelerate != nil {
		if deviceBytes, err = gpuMemory(f.gpuMemory, memCap); err != nil {
			return err
		}
	}
	protocols, err := parseProtocolRange(f.testProtocol)
	if err != nil {
		return err
	}
	// The node's own checks, announced to the members every heartbeat
	// (recomputed at most every few seconds); facts is set once the node
	// is up.
	var facts atomic.Pointer[func() doctor.Local]
	findings := cachedFindings(func() []string {
		if fp := facts.Load(); fp != nil {
			return doctor.Findings(doctor.LocalChecks((*fp)()))
		}
		return nil
	})
	log, err := newLogger(errOut, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	metrics := api.NewMetrics()
	fetchBar := newProgress(errOut)
	full, err := actors.StartNode(ctx, actors.NodeConfig{
		Peers: peers.Config{
			DataDir: f.dataDir, Listen: f.listen, Join: f.join, Secret: secret, NoMDNS: f.noMDNS,
			MemoryBytes: memCap, Version: version, Logger: log, MemoryBandwidth: memBW, Device: device,
			Protocols: protocols, ClockOffset: f.testClockOffset, Findings: findings,
			OnSent:    metrics.AddBytesSent,
			Transport: f.transport,
			Verbs:     side.Options{Apple: f.verbsApple, Faults: faults},
		},
		Origin: origin.Options{PlanContext: f.context, PlanSessions: f.parallel, PromptCache: f.promptCache, NoShortcut: f.noShortcut, StepTimeout: f.stepTimeout, Metrics: metrics, Logger: log, Hidden: hiddenType(f.f16), KVType: kv,
			Placement: placement, Experts: experts, Speculate: specSource, GuessEveryStep: f.guessEveryStep, Draft: draft},
		Models:      cat,
		Hub:         hfhub.FromEnv(),
		Threads:     f.threads,
		OnBatch:     metrics.ObserveBatch,
		Accelerate:  accelerate,
		DeviceBytes: deviceBytes,
		UnloadAfter: f.keepAlive,
		AllReduce:   allreduce.Options{Wire: arWire},
		// A bar on a terminal, a line every few seconds in a log.
		FetchProgress: func(model string, done, total int64) {
			fetchBar.update(model+" (layers from peers)", done, total)
			if done >= total {
				fetchBar.finish()
			}
		},
	})
	if err != nil {
		if errors.Is(err, peers.ErrAddrInUse) {
			return fmt.Errorf("--%w", err)
		}
		return err
	}
	defer full.Close()
	node := full.Peers
	go node.SettleActorRegistry()
	stageSessions := func() int {
		n := 0
		for _, s := range full.Host.Stats().Shards {
			n += int(s.Sessions)
		}
		return n
	}
	go returnMemoryWhenIdle(ctx, func() bool { return len(full.Origin.Sessions())+stageSessions() > 0 }, idleHeap(), idleMemoryAfter, idleTick)
	metrics.Registry().MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_weights_fetched_bytes_total",
			Help: "Bytes of model weights this node fetched from peers."}, func() float64 { return float64(node.Weights().Fetched()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_weights_served_bytes_total",
			Help: "Bytes of model weights this node sent to peers."}, func() float64 { return float64(node.Weights().Served()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_link_fallbacks_total",
			Help: "Side-channel faults (corrupt, missing or stalled frames) that sent activations back to the libp2p stream."}, func() float64 { return float64(node.LinkFallbacks()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_stage_sessions",
			Help: "Sessions open on this node's shards now (a session with stages here counts once per shard; retained prompt caches not counted)."}, func() float64 {
			return float64(stageSessions())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_shards",
			Help: "Shards (a model's layer ranges) loaded on this node now, idle ones of earlier plans included."}, func() float64 {
			return float64(len(full.Host.Stats().Shards))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_used_bytes",
			Help: "Memory this node's shards hold against the memory it offers: weights and the KV caches reserved for sessions."}, func() float64 { return float64(full.Host.UsedBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_offered_bytes",
			Help: "Memory this node offers the cluster (--memory, or physical memory)."}, func() float64 { return float64(node.MemoryOffered()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_stage_kv_bytes",
			Help: "KV cache bytes this node's shards hold now, retained prompt caches included."}, func() float64 {
			n := uint64(0)
			for _, s := range full.Host.Stats().Shards {
				n += s.KvBytes
			}
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_link_returns_total",
			Help: "Links that negotiated their side channel again after a fallback, once the backoff had passed."}, func() float64 { return float64(node.LinkReturns()) }),
	)

	localFacts := func() doctor.Local {
		_, avail := peers.SystemMemory()
		l := doctor.Local{MemoryOffered: node.MemoryOffered(), MemoryHeld: full.Host.UsedBytes(), SystemAvailable: avail,
			DiskDir: cat.Partial.Dir(), DiskBudget: cat.Partial.Budget(), DiskUsed: cat.Partial.Used(), DiskFree: doctor.DiskFree(cat.Partial.Dir()),
			OpenFiles: doctor.OpenFileLimit(), GPUWiredLimitMB: doctor.GPUWiredLimitMB()}
		if source != "--secret" && source != "$STRATA_SECRET" {
			l.SecretFile = source
			l.SecretLoose, _ = peers.LooseFileMode(source)
		}
		return l
	}
	facts.Store(&localFacts)
	models := api.NewFileModels(full.Weights, func() []string { return clusterModels(cat, node) }, f.context)
	models.Info = full.Host.Info // the host's description: one per model on this node
	srv, err := api.NewServer(api.Config{
		Addr: ln.Addr().String(), APIKey: f.apiKey, AllowedHosts: f.allowedHosts, Generator: full.Origin, Metrics: metrics, Logger: log,
		Models:    models,
		Cluster:   func() api.ClusterStatus { return api.ClusterStatusOf(full) },
		Doctor:    func(probe bool) doctor.Report { return api.DoctorOf(node, localFacts(), probe) },
		MaxActive: f.parallel,
		MaxQueue:  queueBound(f.queue),
		Joining:   joiningSince(time.Now(), func() int { return len(node.Membership().View().Members) }),
	})
	if err != nil {
		return err
	}
	srv.Handle("GET /api/peers", api.PeersHandler(func() api.PeersStatus { return api.PeersStatusOf(node) }))

	served := make(chan error, 1)
	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	go func() { served <- srv.Serve(serveCtx, ln) }()

	addrs := node.Addrs()
	fmt.Fprintf(out, "strata node %s (version %s)\n", node.ID(), version)
	for _, a := range addrs {
		fmt.Fprintf(out, "  peers:  %s\n", a)
	}
	fmt.Fprintf(out, "  status: http://%s/api/peers (strata status --api %s)\n", ln.Addr(), ln.Addr())
	fmt.Fprintf(out, "  api:    http://%s/ (dashboard; OpenAI API at /v1; strata run --api %s --model NAME)\n", ln.Addr(), ln.Addr())
	join := joinAddr(addrs)
	// The secret itself is never printed: a command line is seen by every
	// user of the machine (ps) and kept in shell histories.
	if created {
		fmt.Fprintf(out, "created a cluster secret in %s; copy that file (mode 0600) to another machine and join with:\n  strata node --secret-file SECRET_FILE --join %s\n", source, join)
	} else {
		fmt.Fprintf(out, "join with: strata node --secret-file <copy of the secret> --join %s\n", join)
	}

	pidFile := filepath.Join(f.dataDir, nodePIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer removeOwnPIDFile(pidFile)

	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("API: %w", err)
	}
	leave(out, srv, full, f.drainTimeout)
	stopServe()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
	}
	return full.Close()
}

// newLogger makes the node's logger from --log-format and --log-level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level == "" {
		level = "info"
	}
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: text or json", format)
}

// cachedFindings calls compute at most every findingsEvery: heartbeats
// ask every second, and the checks read the file system.
func cachedFindings(compute func() []string) func() []string {
	var mu sync.Mutex
	var last []string
	var at time.Time
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) >= findingsEvery {
			last, at = compute(), time.Now()
		}
		return last
	}
}

const findingsEvery = 5 * time.Second

// parseProtocolRange reads --test-protocol: MIN-MAX or one version; ""
// is the build's own range.
func parseProtocolRange(s string) (peers.ProtocolRange, error) {
	if s == "" {
		return peers.ProtocolRange{}, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 32)
	b, err2 := strconv.ParseUint(hi, 10, 32)
	if err1 != nil || err2 != nil || a == 0 || a > b {
		return peers.ProtocolRange{}, fmt.Errorf("--test-protocol %q: want MIN-MAX, e.g. 1-2", s)
	}
	return peers.ProtocolRange{Min: uint32(a), Max: uint32(b)}, nil
}

// nodePIDFile, in the data directory, holds the running node's process
// ID: strata node stop signals it.
const nodePIDFile = "node.pid"

// removeOwnPIDFile removes the pid file if it still names this process
// (a second node started on the same data directory may have replaced it).
func removeOwnPIDFile(path string) {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(path)
	}
}

// leave is a graceful stop: the API takes no new answers (503, "use
// another node"), the node announces it is leaving and hands its shards'
// sessions to the other members (they replay there at once), and the
// answers this node is giving finish, within drain.
func leave(out io.Writer, srv *api.Server, full *actors.Node, drain time.Duration) {
	start := time.Now()
	fmt.Fprintf(out, "leaving the cluster: no new sessions; finishing the running ones (up to %v; a second signal exits at once)\n", drain)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	idle := srv.Leave()
	err := full.Leave(ctx)
	// The answers being written still get their time when handing the
	// shards over failed: an exit cuts them.
	select {
	case <-idle:
	case <-ctx.Done():
		err = errors.Join(err, errors.New("answers still running after --drain-timeout"))
	}
	if err != nil {
		fmt.Fprintf(out, "left the cluster after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		return
	}
	fmt.Fprintf(out, "left the cluster after %v\n", time.Since(start).Round(time.Millisecond))
}

// clusterModels are the models a prompt here may name: this node's
// complete ones and those any member holds (whole or in part), which this
// node can reach by fetching their headers.
func clusterModels(cat catalog.Catalog, node *peers.Node) []string {
	names := cat.Names()
	for _, m := range node.Membership().View().Members {
		for _, mi := range m.Info.GetModels() {
			names = append(names, mi.GetName())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func hiddenType(f16 bool) messages.HiddenType {
	if f16 {
		return messages.HiddenType_HIDDEN_F16
	}
	return messages.HiddenType_HIDDEN_F32
}

// joinAddr picks the address to tell other machines: the first that is
// not loopback, else the first.
func joinAddr(addrs []ma.Multiaddr) string {
	for _, a := range addrs {
		s := a.String()
		if !strings.HasPrefix(s, "/ip4/127.") && !strings.HasPrefix(s, "/ip6/::1/") {
			return s
		}
	}
	if len(addrs) > 0 {
		return addrs[0].String()
	}
	return ""
}

// parseVerbsFaults reads --verbs-faults: KIND@FRAME, the frame (counted
// from 0 on each link) that gets the fault.
func parseVerbsFaults(spec string) (func(peer.ID) func(int) verbs.Fault, error) {
	if spec == "" {
		return nil, nil
	}
	kind, at, ok := strings.Cut(spec, "@")
	frame, err := strconv.Atoi(at)
	if !ok || err != nil || frame < 0 {
		return nil, fmt.Errorf("--verbs-faults %q: want KIND@FRAME, e.g. corrupt@9", spec)
	}
	for f := verbs.Drop; f <= verbs.Stall; f++ {
		if f.String() == kind {
			return func(peer.ID) func(int) verbs.Fault {
				return func(n int) verbs.Fault {
					if n == frame {
						return f
					}
					return verbs.Deliver
				}
			}, nil
		}
	}
	return nil, fmt.Errorf("--verbs-faults %q: kind is drop, truncate, corrupt, reorder or stall", spec)
}

// queueBound is api.Config.MaxQueue for --queue n: --queue 0 lets none
// wait, which api.Config spells negative (its 0 is the default).
func queueBound(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
