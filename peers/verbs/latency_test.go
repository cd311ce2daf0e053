package verbs

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestShmHandoffLatency is a ping-pong of small activations between two
// processes over shared-memory rings, shaped as a strata node uses them:
// a goroutine reads each ring and hands the message to another goroutine
// (the actor), which answers through the other ring, and readers wait on
// other, idle links. A reader parked where the Go scheduler cannot see it
// (a futex wait, as strata did) holds a processor; with every processor
// so held, the goroutine a reader hands a message to waits for the
// runtime's monitor to take one back. Here that showed as a median of
// 0.09 to 3.9 ms and a p90 up to 5 ms, run to run: not reliably, which is
// why the end-to-end check (TestE2ESideChannel's link round trips, 10-43
// ms then) is the one that catches it. The bound, 1 ms for the median
// round trip, is generous: a working link takes a few hundred
// microseconds here.
func TestShmHandoffLatency(t *testing.T) {
	caps := Caps{FrameBytes: 8192, Depth: 16}
	t1, t2 := make([]byte, tokenBytes), make([]byte, tokenBytes)
	rand.Read(t1)
	rand.Read(t2)
	out, err := CreateShm(caps, t1) // we send in its direction 0
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	back, err := CreateShm(caps, t2) // the child sends in its direction 1
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShmHandoffChild$")
	cmd.Env = append(os.Environ(), "VERBS_HANDOFF="+hex.EncodeToString(t1)+","+hex.EncodeToString(t2))
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("child: %q %v\n%s", line, err, stderr.String())
	}
	out.Unlink()
	back.Unlink()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	idleReaders(t, ctx)
	handed, errc := handOff(ctx, back)
	tx, _ := NewSender(out)
	const n = 300
	msg := make([]byte, 2048) // a small model's hidden state
	rtts := make([]time.Duration, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		start := time.Now()
		if err := tx.Send(ctx, seq, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-handed:
		case err := <-errc:
			t.Fatalf("receive: %v\nchild: %s", err, stderr.String())
		}
		rtts = append(rtts, time.Since(start))
		time.Sleep(time.Millisecond) // the next token's compute
	}
	slices.Sort(rtts)
	p50, p90 := rtts[n/2], rtts[n*9/10]
	t.Logf("round trip over shm with hand-offs: p50 %v, p90 %v, max %v", p50, p90, rtts[n-1])
	if p50 > time.Millisecond {
		t.Errorf("median round trip %v: over 1 ms (p90 %v)", p50, p90)
	}
}

// TestShmHandoffChild is the echoing process of TestShmHandoffLatency.
func TestShmHandoffChild(t *testing.T) {
	arg := os.Getenv("VERBS_HANDOFF")
	if arg == "" {
		t.Skip("run by TestShmHandoffLatency")
	}
	h1, h2, _ := strings.Cut(arg, ",")
	t1, _ := hex.DecodeString(h1)
	t2, _ := hex.DecodeString(h2)
	in, err := OpenShm(t1)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := OpenShm(t2)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	idleReaders(t, ctx)
	handed, errc := handOff(ctx, in)
	tx, _ := NewSender(out)
	fmt.Println("ready")
	for seq := uint64(1); ; seq++ {
		var msg []byte
		select {
		case msg = <-handed:
		case err := <-errc:
			if ctx.Err() == nil {
				t.Log(err)
			}
			return
		}
		if err := tx.Send(ctx, seq, msg); err != nil {
			return
		}
	}
}

// handOff reads c on a goroutine of its own and hands each message over a
// channel, as a node's link reader hands activations to its actors.
func handOff(ctx context.Context, c Conn) (<-chan []byte, <-chan error) {
	rx, _ := NewReceiver(c, 1)
	rx.Stall = time.Minute
	handed, errc := make(chan []byte, 1), make(chan error, 1)
	go func() {
		for {
			_, msg, err := rx.Recv(ctx)
			if err != nil {
				errc <- err
				return
			}
			handed <- slices.Clone(msg)
		}
	}()
	return handed, errc
}

// idleReaders parks a reader on each of GOMAXPROCS idle rings, as a node
// linked to several peers has a reader waiting on each link.
func idleReaders(t *testing.T, ctx context.Context) {
	for range runtime.GOMAXPROCS(0) {
		token := make([]byte, tokenBytes)
		rand.Read(token)
		a, err := CreateShm(Caps{FrameBytes: 4096, Depth: 4}, token)
		if err != nil {
			t.Fatal(err)
		}
		b, err := OpenShm(token)
		if err != nil {
			t.Fatal(err)
		}
		a.Unlink()
		rx, _ := NewReceiver(b, 1)
		done := make(chan struct{})
		go func() { defer close(done); rx.Recv(ctx) }()
		t.Cleanup(func() { <-done; a.Close(); b.Close() })
	}
}
