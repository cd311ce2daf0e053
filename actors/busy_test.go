package actors

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/internal/testdata"
	"strata/runtime/engine"
)

// TestBusyStageWaitsForRoom: one node with memory for the weights and one
// session's KV cache takes two requests at once. The second session's
// stage has no room (the first holds it): instead of failing, the second
// is tried again until the first ends, and both answers are one node's.
// A request that cannot get room within StepTimeout ends with
// engine.ErrBusy (the API's 503). Each request logs one session line,
// however many times it was tried.
func TestBusyStageWaitsForRoom(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	models := t.TempDir()
	if err := os.Symlink(path, filepath.Join(models, "stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	nodes := startNodesFn(t, models, 512, 1, 1500e3, 1, func(i int, cfg *NodeConfig) {
		cfg.Origin.Logger = slog.New(slog.NewJSONHandler(&log, nil))
	}, 5*time.Second)
	want := oracle.OneNode(t, path, engine.Request{MaxTokens: 120})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	texts := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			res, err := nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 120}, func(engine.Token) error {
				time.Sleep(2 * time.Millisecond) // hold the room a while
				return nil
			})
			texts[i], errs[i] = res.Text, err
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || texts[i] != want.Text {
			t.Errorf("request %d: %v\n got %q\nwant %q", i, errs[i], texts[i], want.Text)
		}
	}

	// A session that holds the room for longer than StepTimeout: the
	// other ends with ErrBusy, having generated nothing.
	hold := make(chan struct{})
	started := make(chan struct{})
	go nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 3}, func(engine.Token) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-hold
		return nil
	})
	<-started
	defer close(hold)
	n := 0
	_, err := nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 3}, func(engine.Token) error { n++; return nil })
	if !errors.Is(err, engine.ErrBusy) || n != 0 {
		t.Errorf("with the room held: %v after %d tokens, want ErrBusy and none", err, n)
	}
	if lines := strings.Count(log.String(), `"outcome":"error"`); lines != 1 {
		t.Errorf("%d error session lines for the one request that failed (busy), want 1:\n%s", lines, log.String())
	}
	if !strings.Contains(log.String(), `"busy_retries":`) {
		t.Errorf("no session line counts its busy retries:\n%s", log.String())
	}
}
