//go:build !linux

package verbs

import (
	"context"
	"os"
	"sync/atomic"
	"time"
)

// sleepWaker parks by sleeping in short steps: there is no futex on this
// system (macOS has one only behind private API).
type sleepWaker struct{}

func (sleepWaker) wait(ctx context.Context, ev *uint32, seen uint32, _ int) error {
	for i := 0; atomic.LoadUint32(ev) == seen && i < 100; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
	return ctx.Err()
}

func (sleepWaker) wake(*uint32, int) {}

func shmWaker() waker { return sleepWaker{} }

var shmDir = os.TempDir()
