package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strata/internal/doctor"
	"strings"
	"time"
)

// DefaultAddr is where the API listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7340"

// Config configures NewServer. Generator and Models are required; zero
// values of the rest pick the defaults noted.
type Config struct {
	// Addr is the listen address of ListenAndServe; "" = DefaultAddr. A
	// host that is not loopback (including "" as in ":7340") needs APIKey.
	Addr string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// every endpoint but the dashboard's static files.
	APIKey string
	// Generator runs generations (an *origin.Origin, or a *Local).
	Generator Generator
	// Models lists models and gives their tokenizers (a *FileModels, or a *Local).
	Models Models
	// Cluster is the snapshot GET /api/cluster serves; nil = the Local
	// generator's one-node picture when Generator is a *Local, else an
	// empty cluster.
	Cluster func() ClusterStatus
	// Doctor, when set, is the report GET /api/doctor serves (strata
	// doctor and the dashboard's health panel read it); nil = no route.
	Doctor func(probe bool) doctor.Report
	// Metrics is where the server records what it does; nil = NewMetrics().
	// Share it with the cluster so hops and bytes show on /metrics.
	Metrics *Metrics
	// MaxActive is how many generations run at once; 0 = 4.
	MaxActive int
	// MaxQueue is how many more wait their turn, first come first served,
	// before further requests get 429; 0 = 64, negative = none wait.
	MaxQueue int
	// MaxBodyBytes bounds a request body (413 beyond); 0 = 4 MiB.
	MaxBodyBytes int64
	// MaxPromptTokens bounds a prompt below the model's context; 0 = the
	// context length less one.
	MaxPromptTokens int
	// Logger receives failed generations; nil = silent.
	Logger *slog.Logger
	// Joining says the node has just started and has not heard from the
	// cluster yet: a model it does not know may be one the others hold,
	// so it answers 503 (retry, or ask another node), not 404. nil = never.
	Joining func() bool
	// AllowedHosts are names, besides localhost and IP addresses, that a
	// request's Host may give when there is no APIKey ("*" = any). Other
	// names are refused: a web page can rebind its own name to 127.0.0.1.
	AllowedHosts []string
	// ReadTimeout bounds how long a client takes to send a request's
	// headers and body; 0 = 30 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of an answer (each event of a
	// stream), so a client that stops reading frees its slot; 0 = 30 s.
	WriteTimeout time.Duration
}

// Server is the HTTP API of one node: the OpenAI-compatible endpoints,
// the cluster and stats APIs, /metrics and the dashboard.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	queue   *queue
	metrics *Metrics
	handler http.Handler
	vocabs  vocabs // token tries for constrained sampling
}

// Leave makes the server refuse every later generation request with 503
// and Retry-After (code node_leaving: the client should use another node)
// while those running or queued go on; the channel it returns is closed
// once none is left. Other endpoints keep answering.
func (s *Server) Leave() <-chan struct{} { return s.queue.close() }

// NewServer validates cfg and builds the routes. It refuses a non-loopback
// Addr without an APIKey (ErrAPIKeyRequired).
func NewServer(cfg Config) (*Server, error) {
	if cfg.Generator == nil || cfg.Models == nil {
		return nil, errors.New("api: Config.Generator and Config.Models are required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if !IsLoopback(cfg.Addr) && cfg.APIKey == "" {
		return nil, fmt.Errorf("%w (%s); set --api-key or STRATA_API_KEY", ErrAPIKeyRequired, cfg.Addr)
	}
	if cfg.MaxActive <= 0 {
		cfg.MaxActive = 4
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 64
	} else if cfg.MaxQueue < 0 {
		cfg.MaxQueue = 0
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Cluster == nil {
		if l, ok := cfg.Generator.(*Local); ok {
			cfg.Cluster = l.Status
		} else {
			cfg.Cluster = func() ClusterStatus { return ClusterStatus{} }
		}
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: cfg.Metrics}
	s.queue = newQueue(cfg.MaxActive, cfg.MaxQueue, cfg.Metrics.queue)

	s.handler = s.routes()
	return s, nil
}

// Handler is the server's routes, for mounting or httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Metrics is the server's metrics (Config.Metrics or the one it made).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Addr is the configured listen address.
func (s *Server) Addr() string { return s.cfg.Addr }

// ListenAndServe listens on Config.Addr and serves until ctx ends, then
// shuts down, giving open requests a few seconds.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends (see ListenAndServe). ln must be on
// the configured kind of address: a loopback listener, or any with an
// API key.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !IsLoopback(ln.Addr().String()) && s.cfg.APIKey == "" {
		ln.Close()
		return fmt.Errorf("%w (%s)", ErrAPIKeyRequired, ln.Addr())
	}
	// No WriteTimeout: answers stream for as long as a generation runs;
	// each write gets its own deadline instead (Config.WriteTimeout).
	// Requests' contexts end with ctx too, with errStopping as their cause,
	// so that an answer cut by the node's exit says so (a client that
	// hung up is the other cause, and is not answered).
	base, stop := context.WithCancelCause(context.Background())
	defer context.AfterFunc(ctx, func() { stop(errStopping) })()
	defer stop(errStopping)
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: min(10*time.Second, s.cfg.ReadTimeout), ReadTimeout: s.cfg.ReadTimeout,
		IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut)
		<-errc
		return nil
	}
}

// errStopping is the cause of a request context the server's end cut.
var errStopping = errors.New("the node stopped")

// IsLoopback reports whether a host:port address only accepts
// connections from this machine.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
