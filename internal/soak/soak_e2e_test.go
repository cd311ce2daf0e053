//go:build e2e

package soak

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"strata/internal/testdata"
)

// maxRSSGrowthPct is the invariant's bound on a node's resident memory,
// idle at the end against its idle baseline (after SOAK_WARMUP of traffic,
// and SOAK_SETTLE of faults where set): 10 %
// (SOAK_MAX_RSS_GROWTH sets another).
var maxRSSGrowthPct = float64(envInt("SOAK_MAX_RSS_GROWTH", 10))

// TestE2ESoak runs the soak (make soak; make test skips it): SOAK_DURATION
// (default 5m), SOAK_SEED (default: the time), SOAK_NODES (4), SOAK_CLIENTS (6),
// SOAK_FAULT_MIN/MAX (20s/60s), SOAK_WARMUP (60s), SOAK_SETTLE (faults before
// the memory baseline; 0: none, the baseline follows the warm-up), SOAK_CHECKPOINT (idle
// memory samples between baseline and end every so long; 0: none), SOAK_NETWORK
// (auto|netns|loopback; auto: a network namespace per node when root),
// SOAK_LINK_RATE (1gbit, tc tbf), SOAK_FAULTS (kinds, comma-separated:
// kill,stop,leave,cut; default all), BIN (default: built here). Its last output
// line is the report's JSON, prefixed SOAK_REPORT (scripts/soak.sh prints
// it).
func TestE2ESoak(t *testing.T) {
	cfg := Config{Nodes: envInt("SOAK_NODES", 4), Clients: envInt("SOAK_CLIENTS", 6), Duration: envDuration("SOAK_DURATION", 5*time.Minute),
		FaultMin: envDuration("SOAK_FAULT_MIN", 20*time.Second), FaultMax: envDuration("SOAK_FAULT_MAX", 60*time.Second),
		Warmup: envDuration("SOAK_WARMUP", 60*time.Second), Settle: envDuration("SOAK_SETTLE", 0), Checkpoint: envDuration("SOAK_CHECKPOINT", 0), Seed: uint64(time.Now().UnixNano()), Log: os.Stdout, Dir: os.Getenv("SOAK_DIR"),
		Network: os.Getenv("SOAK_NETWORK"), LinkRate: cmp.Or(os.Getenv("SOAK_LINK_RATE"), "1gbit"),
		Model: testdata.Path(t, "gguf/stories260K.gguf")}
	if cfg.Dir == "" { // SOAK_DIR keeps the nodes' logs after the run
		cfg.Dir = t.TempDir()
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if f := os.Getenv("SOAK_FAULTS"); f != "" {
		cfg.Faults = strings.Split(f, ",")
	}
	if s := os.Getenv("SOAK_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED %q", s)
		}
		cfg.Seed = seed
	}
	fmt.Printf("soak: seed %d (SOAK_SEED=%d repeats this run's faults)\n", cfg.Seed, cfg.Seed)
	cfg.Bin = os.Getenv("BIN")
	if cfg.Bin == "" {
		cfg.Bin = filepath.Join(t.TempDir(), "strata")
		if out, err := exec.Command("go", "build", "-o", cfg.Bin, "strata/cmd/strata").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fmt.Println("SOAK_REPORT " + rep.JSON())
	t.Logf("%d requests: %d answered, %d refused, %d cancelled, %d cut by their origin's SIGKILL, %d lost, %d wrong; faults %v; leaked sessions %d; RSS growth %.1f%% (%.1f%% from the warm-up); idle CPU %.3f",
		rep.Requests, rep.Answered, rep.Refused, rep.Cancelled, rep.OriginKilled, rep.Lost, rep.Wrong, rep.Faults, rep.Leaked, rep.RSSGrowthPct, rep.RSSGrowthFromWarmupPct, rep.IdleCPU)
	if !rep.OK(maxRSSGrowthPct) {
		t.Errorf("invariants broken: %s", rep.JSON())
		for _, f := range rep.Failures {
			t.Log(f)
		}
		for i := range cfg.Nodes {
			if b, err := os.ReadFile(filepath.Join(cfg.Dir, fmt.Sprintf("n%d.log", i))); err == nil {
				t.Logf("n%d log (tail):\n%s", i, tail(string(b), 40))
			}
		}
	}
}

func tail(s string, n int) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
