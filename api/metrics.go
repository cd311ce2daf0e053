package api

import (
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"strata/runtime/engine"
)

// Metrics collects what GET /metrics exports (Prometheus text format) and
// what the dashboard shows (GET /api/stats). The API server records
// requests, tokens, time to first token and the queue; the cluster
// records per-hop latency and bytes sent per peer through ObserveHop,
// ObserveStep and AddBytesSent. Packages below api (actors, peers) cannot
// import it: they declare a small interface with the methods they call,
// which *Metrics satisfies (origin.Metrics is one).
//
// All methods are safe for concurrent use, and a nil *Metrics ignores
// every call.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // endpoint, code
	generated *prometheus.CounterVec   // model
	prompt    *prometheus.CounterVec   // model
	cached    *prometheus.CounterVec   // model
	drafted   *prometheus.CounterVec   // model
	accepted  *prometheus.CounterVec   // model
	ttft      prometheus.Histogram     // seconds from request arrival to the first token
	decode    prometheus.Histogram     // tokens/s of each finished generation's decode
	hop       *prometheus.HistogramVec // peer
	step      prometheus.Histogram     // one ring step, as the last stage measures it
	sent      *prometheus.CounterVec   // peer
	active    prometheus.Gauge
	waiting   prometheus.Gauge
	queueWait prometheus.Histogram // seconds a generation request waited for a slot
	batch     prometheus.Histogram // sessions' steps per forward pass of a shard
	batchRows prometheus.Histogram // token positions per forward pass of a shard

	rate rateWindow

	mu        sync.Mutex
	total     int64                 // generated tokens since start
	lastTTFT  time.Duration         // most recent time to first token
	peerBytes map[string]int64      // bytes sent per peer
	peerHop   map[string]*meanTimer // hop latency per peer
	nActive   int
	nWaiting  int
}

// NewMetrics returns Metrics on a fresh registry that also carries the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), peerBytes: map[string]int64{}, peerHop: map[string]*meanTimer{}}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_api_requests_total", Help: "API requests answered, by endpoint and HTTP status code."}, []string{"endpoint", "code"})
	m.generated = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_generated_tokens_total", Help: "Tokens generated through the API."}, []string{"model"})
	m.prompt = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_prompt_tokens_total", Help: "Prompt tokens processed through the API."}, []string{"model"})
	m.cached = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_prompt_cached_tokens_total", Help: "Prompt tokens whose KV cache was reused from an earlier request (prompt caching) instead of prefilled."}, []string{"model"})
	m.drafted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_speculative_drafted_tokens_total", Help: "Tokens guessed by speculative decoding (n-gram lookup or a draft model) and checked by the model."}, []string{"model"})
	m.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_speculative_accepted_tokens_total", Help: "Guessed tokens the model agreed with: each one a token without a forward pass of its own."}, []string{"model"})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_time_to_first_token_seconds", Help: "Time from a request's arrival (queueing included) to its first generated token.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	m.decode = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_decode_tokens_per_second", Help: "Decode speed of each finished generation.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)})
	m.hop = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_hop_latency_seconds", Help: "Latency of one activation hop to a peer.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12)}, []string{"peer"})
	m.step = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_ring_step_seconds", Help: "Time the ring of stages took for one token (Token.elapsed_ns).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	m.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_peer_sent_bytes_total", Help: "Bytes sent to each peer."}, []string{"peer"})
	m.active = prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_api_active_requests", Help: "Generation requests running now."})
	m.waiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_api_queue_depth", Help: "Generation requests waiting in the queue now."})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_api_queue_wait_seconds", Help: "Time a generation request waited in the queue for a slot (0 when one was free).",
		Buckets: append([]float64{0}, prometheus.ExponentialBuckets(0.01, 4, 8)...)})
	m.batch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_batch_sessions", Help: "Sessions whose steps one forward pass of this node's shards carried (continuous batching).",
		Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 32, 64}})
	m.batchRows = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_batch_tokens", Help: "Token positions one forward pass of this node's shards computed (tokens per step: a decode step is one per session, a prompt chunk its length).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	tps := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_tokens_per_second", Help: "Tokens generated per second over the last few seconds, all requests together."},
		func() float64 { return m.rate.rate(time.Now()) })
	for _, c := range []prometheus.Collector{m.requests, m.generated, m.prompt, m.cached, m.drafted, m.accepted, m.ttft, m.decode, m.hop, m.step, m.sent, m.active, m.waiting, m.queueWait, m.batch, m.batchRows, tps,
		// go_gc_heap_live_bytes: the heap the last collection found live
		// (MemStats' figures count garbage not yet collected).
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// Registry is the registry /metrics serves; register more collectors on it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveHop records the latency of one hop to peer (an activation sent
// and acknowledged, or a stage's share of a ring step).
func (m *Metrics) ObserveHop(peer string, d time.Duration) {
	if m == nil {
		return
	}
	m.hop.WithLabelValues(peer).Observe(d.Seconds())
	m.mu.Lock()
	t := m.peerHop[peer]
	if t == nil {
		t = &meanTimer{}
		m.peerHop[peer] = t
	}
	t.add(d)
	m.mu.Unlock()
}

// ObserveStep records the time one token took around the ring of stages
// (messages.Token.elapsed_ns).
func (m *Metrics) ObserveStep(d time.Duration) {
	if m == nil {
		return
	}
	m.step.Observe(d.Seconds())
}

// ObserveBatch records one forward pass of a shard: the sessions' steps
// it carried and the token positions they filled (stage.HostConfig.OnBatch).
func (m *Metrics) ObserveBatch(steps, rows int) {
	if m == nil {
		return
	}
	m.batch.Observe(float64(steps))
	m.batchRows.Observe(float64(rows))
}

// AddBytesSent counts n bytes sent to peer.
func (m *Metrics) AddBytesSent(peer string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.sent.WithLabelValues(peer).Add(float64(n))
	m.mu.Lock()
	m.peerBytes[peer] += int64(n)
	m.mu.Unlock()
}

// request counts one answered API request.
func (m *Metrics) request(endpoint string, code int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}

// firstToken records a time to first token.
func (m *Metrics) firstToken(d time.Duration) {
	if m == nil {
		return
	}
	m.ttft.Observe(d.Seconds())
	m.mu.Lock()
	m.lastTTFT = d
	m.mu.Unlock()
}

// token counts one generated token as it is streamed.
func (m *Metrics) token(model string) {
	if m == nil {
		return
	}
	m.generated.WithLabelValues(model).Inc()
	m.rate.add(time.Now(), 1)
	m.mu.Lock()
	m.total++
	m.mu.Unlock()
}

// finished records a generation's prompt size and decode speed.
func (m *Metrics) finished(model string, res engine.Result) {
	if m == nil {
		return
	}
	promptTokens, cached, generated, decode := res.PromptTokens, res.CachedTokens, len(res.Tokens), res.DecodeDuration
	m.prompt.WithLabelValues(model).Add(float64(promptTokens))
	m.cached.WithLabelValues(model).Add(float64(cached))
	if res.Drafted > 0 {
		m.drafted.WithLabelValues(model).Add(float64(res.Drafted))
		m.accepted.WithLabelValues(model).Add(float64(res.Accepted))
	}
	if generated > 1 && decode > 0 {
		m.decode.Observe(float64(generated) / decode.Seconds())
	}
}

// queued records how long an admitted generation request waited.
func (m *Metrics) queued(d time.Duration) {
	if m == nil {
		return
	}
	m.queueWait.Observe(d.Seconds())
}

// queue mirrors the queue's state.
func (m *Metrics) queue(active, waiting int) {
	if m == nil {
		return
	}
	m.active.Set(float64(active))
	m.waiting.Set(float64(waiting))
	m.mu.Lock()
	m.nActive, m.nWaiting = active, waiting
	m.mu.Unlock()
}

// Stats is the body of GET /api/stats, what the dashboard polls.
type Stats struct {
	TokensPerSecond float64     `json:"tokens_per_second"`
	GeneratedTokens int64       `json:"generated_tokens"`
	Active          int         `json:"active"`
	Waiting         int         `json:"waiting"`
	LastTTFTMillis  float64     `json:"last_ttft_ms"`
	Peers           []PeerStats `json:"peers"`
}

// PeerStats is what this node measured of its links to one peer.
type PeerStats struct {
	PeerID        string  `json:"peer_id"`
	BytesSent     int64   `json:"bytes_sent"`
	HopMillisMean float64 `json:"hop_ms_mean"`
	Hops          int64   `json:"hops"`
}

// Snapshot returns the current Stats.
func (m *Metrics) Snapshot() Stats {
	if m == nil {
		return Stats{}
	}
	s := Stats{TokensPerSecond: m.rate.rate(time.Now())}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.GeneratedTokens, s.Active, s.Waiting = m.total, m.nActive, m.nWaiting
	s.LastTTFTMillis = float64(m.lastTTFT.Microseconds()) / 1000
	peers := map[string]*PeerStats{}
	get := func(id string) *PeerStats {
		if p := peers[id]; p != nil {
			return p
		}
		p := &PeerStats{PeerID: id}
		peers[id] = p
		return p
	}
	for id, n := range m.peerBytes {
		get(id).BytesSent = n
	}
	for id, t := range m.peerHop {
		p := get(id)
		p.Hops = t.n
		p.HopMillisMean = t.mean().Seconds() * 1000
	}
	for _, p := range peers {
		s.Peers = append(s.Peers, *p)
	}
	sort.Slice(s.Peers, func(i, j int) bool { return s.Peers[i].PeerID < s.Peers[j].PeerID })
	return s
}

type meanTimer struct {
	n   int64
	sum time.Duration
}

func (t *meanTimer) add(d time.Duration) { t.n++; t.sum += d }
func (t *meanTimer) mean() time.Duration {
	if t.n == 0 {
		return 0
	}
	return t.sum / time.Duration(t.n)
}

// rateWindow counts events in one-second buckets to report a rate over
// the last rateSeconds seconds.
type rateWindow struct {
	mu     sync.Mutex
	counts [rateSeconds + 1]int64
	stamps [rateSeconds + 1]int64 // the Unix second each bucket holds
}

const rateSeconds = 5

func (w *rateWindow) add(now time.Time, n int64) {
	s := now.Unix()
	i := s % int64(len(w.counts))
	w.mu.Lock()
	if w.stamps[i] != s {
		w.stamps[i], w.counts[i] = s, 0
	}
	w.counts[i] += n
	w.mu.Unlock()
}

// rate is the events per second over the last rateSeconds full seconds
// and the part of the current one that has passed.
func (w *rateWindow) rate(now time.Time) float64 {
	s := now.Unix()
	var sum int64
	w.mu.Lock()
	for i, st := range w.stamps {
		if st > s-rateSeconds-1 && st <= s {
			sum += w.counts[i]
		}
	}
	w.mu.Unlock()
	span := rateSeconds + float64(now.Nanosecond())/1e9
	return float64(sum) / span
}
