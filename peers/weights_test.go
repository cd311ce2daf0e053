package peers_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"strata/peers"
	"strata/peers/peerstest"
	"strata/peers/weights"
)

// fileSource serves one model, "m", of two parts.
type fileSource struct{ parts []string }

func (s fileSource) WeightFile(model string, part int, off, size int64) (string, error) {
	if model != "m" || part < 0 || part >= len(s.parts) {
		return "", errors.New("not held here")
	}
	return s.parts[part], nil
}

func (s fileSource) WeightManifest(model string) ([]byte, error) {
	if model == "m" {
		return []byte(`{"manifest":"of m"}`), nil
	}
	return nil, errors.New("unknown model")
}

func TestWeightsFromSeveralPeers(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	parts := make([][]byte, 2)
	var paths []string
	for i, n := range []int{13<<20 + 123, 3 << 20} {
		parts[i] = make([]byte, n)
		for j := range parts[i] {
			parts[i][j] = byte(r.Uint32())
		}
		p := filepath.Join(dir, "part"+string(rune('0'+i)))
		os.WriteFile(p, parts[i], 0o644)
		paths = append(paths, p)
	}
	c := peerstest.New(t, 3, peerstest.WithConfig(func(cfg *peers.Config) { cfg.Weights = fileSource{paths} }))
	a, b, me := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	ctx := ctxWithin(t, within)

	m, err := me.Weights().Manifest(ctx, a.ID(), "m")
	if err != nil || string(m) != `{"manifest":"of m"}` {
		t.Fatalf("manifest %q %v", m, err)
	}
	ranges := []weights.Range{
		{Part: 0, Offset: 7, Data: make([]byte, 13<<20)},
		{Part: 1, Offset: 0, Data: make([]byte, 3<<20)},
		{Part: 1, Offset: 3<<20 - 5, Data: make([]byte, 5)},
	}
	var failedOnce atomic.Bool
	check := func(i int) error {
		if i == 1 && failedOnce.CompareAndSwap(false, true) {
			return errors.New("digest mismatch (simulated)")
		}
		return nil
	}
	if err := me.Weights().Fetch(ctx, []peer.ID{a.ID(), b.ID()}, "m", ranges, check); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ranges[0].Data, parts[0][7:7+13<<20]) || !bytes.Equal(ranges[1].Data, parts[1]) || !bytes.Equal(ranges[2].Data, parts[1][3<<20-5:]) {
		t.Fatal("fetched bytes differ from the file")
	}
	want := int64(13<<20 + 3<<20 + 5 + 3<<20) // range 1 twice: its check failed once
	if got := me.Weights().Fetched(); got != want {
		t.Errorf("fetched %d bytes, want %d", got, want)
	}
	if a.Weights().Served() == 0 || b.Weights().Served() == 0 || a.Weights().Served()+b.Weights().Served() != want {
		t.Errorf("served %d + %d, want both to serve, %d in all", a.Weights().Served(), b.Weights().Served(), want)
	}

	// Refusals: unknown model, past the end, too large, bad part.
	for _, tc := range []struct {
		model      string
		part       int
		off, bytes int64
	}{{"nope", 0, 0, 10}, {"m", 1, 3 << 20, 1}, {"m", 0, 0, weights.MaxRange + 1}, {"m", 7, 0, 1}} {
		err := me.Weights().Read(ctx, a.ID(), tc.model, tc.part, tc.off, make([]byte, tc.bytes))
		if !errors.Is(err, weights.ErrRefused) {
			t.Errorf("%+v: %v", tc, err)
		}
	}

	// A holder gone: the other serves everything.
	c.Kill(0)
	again := []weights.Range{{Part: 0, Offset: 0, Data: make([]byte, 9<<20)}}
	before := b.Weights().Served()
	if err := me.Weights().Fetch(ctx, []peer.ID{a.ID(), b.ID()}, "m", again, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again[0].Data, parts[0][:9<<20]) || b.Weights().Served()-before != 9<<20 {
		t.Errorf("after a holder left: served %d", b.Weights().Served()-before)
	}
	c.Kill(1)
	if err := me.Weights().Fetch(ctx, []peer.ID{a.ID(), b.ID()}, "m", again, nil); !errors.Is(err, weights.ErrNoHolder) {
		t.Errorf("no holder left: %v", err)
	}
}

// slowSource answers manifests only when released.
type slowSource struct {
	fileSource
	release chan struct{}
	asked   *atomic.Int32
}

func (s slowSource) WeightManifest(model string) ([]byte, error) {
	s.asked.Add(1)
	<-s.release
	return s.fileSource.WeightManifest(model)
}

// Manifest requests take a serving slot as reads do (found by reading in
// the second hardening round: they bypassed the 16-slot limit, and a
// complete model's first manifest reads the whole file): the 17th at
// once is refused as busy, before the source is asked.
func TestManifestRequestsTakeASlot(t *testing.T) {
	release, asked := make(chan struct{}), &atomic.Int32{}
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Weights = slowSource{release: release, asked: asked}
	}))
	a, b := c.Nodes[0], c.Nodes[1]
	ctx := ctxWithin(t, within)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := a.Weights().Manifest(ctx, b.ID(), "m")
			errs <- err
		}()
	}
	for asked.Load() < 16 {
		if ctx.Err() != nil {
			t.Fatalf("%d of 16 manifest requests reached the source", asked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := a.Weights().Manifest(ctx, b.ID(), "m"); !errors.Is(err, weights.ErrRefused) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a 17th request: %v, want busy", err)
	}
	if n := asked.Load(); n != 16 {
		t.Fatalf("the source was asked %d times", n)
	}
	close(release)
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
