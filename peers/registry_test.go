package peers_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/peers"
)

// TestSettledRegistryDoesNotGrow: after SettleActorRegistry, 100,000
// request futures (each a PID under a new ID, as every step of every
// answer makes) leave the heap where it was; unsettled, the registry's
// maps grow by several MB over as many.
func TestSettledRegistryDoesNotGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 futures")
	}
	cfg := peers.Config{DataDir: t.TempDir(), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Secret: peers.NewSecret(), Logger: slog.New(slog.DiscardHandler)}
	n, err := peers.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.SettleActorRegistry()
	sys := n.ActorSystem()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			c.Respond("ok")
		}
	}))
	heap := func() float64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse)
	}
	before := heap()
	for range 100_000 {
		if _, err := sys.Root.RequestFuture(pid, "x", 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	if grew := heap() - before; grew > 1.5e6 {
		t.Errorf("the heap grew by %.1f MB over 100,000 futures after the registry was settled", grew/1e6)
	}
}
