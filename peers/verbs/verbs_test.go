package verbs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// testCaps: small frames so that messages span several.
var testCaps = Caps{FrameBytes: 1024, Depth: 8, Reliable: true}

// message returns message seq of a deterministic stream: sizes from 0 to
// a few frames, random bytes from (seed, seq).
func message(seed, seq uint64, frame int) []byte {
	r := mrand.New(mrand.NewPCG(seed, seq))
	sizes := []int{0, 1, frame - frameHeader - 1, frame - frameHeader, frame - frameHeader + 1, 3*frame + 17}
	n := sizes[r.IntN(len(sizes))]
	if r.IntN(3) == 0 {
		n = r.IntN(5 * frame)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pairs are the backends two Conns can be made with in one process.
func pairs(t *testing.T, c Caps) map[string][2]Conn {
	t.Helper()
	la, lb, err := Loop(c)
	if err != nil {
		t.Fatal(err)
	}
	token := make([]byte, tokenBytes)
	rand.Read(token)
	sa, err := CreateShm(c, token)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := OpenShm(token)
	if err != nil {
		t.Fatal(err)
	}
	sa.Unlink()
	t.Cleanup(func() { la.Close(); lb.Close(); sa.Close(); sb.Close() })
	return map[string][2]Conn{"loop": {la, lb}, "shm": {sa, sb}}
}

func TestDeliveryBitExact(t *testing.T) {
	for _, caps := range []Caps{testCaps, AppleCaps} {
		for name, p := range pairs(t, caps) {
			t.Run(fmt.Sprintf("%s/frame%d", name, caps.FrameBytes), func(t *testing.T) {
				const n = 300
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				s, err := NewSender(p[0])
				if err != nil {
					t.Fatal(err)
				}
				r, err := NewReceiver(p[1], 1)
				if err != nil {
					t.Fatal(err)
				}
				errc := make(chan error, 1)
				go func() {
					for seq := uint64(1); seq <= n; seq++ {
						// Every other message is written in place (Write: into the
						// receive slot on these backends, or framed when longer
						// than one frame).
						m := message(7, seq, caps.FrameBytes)
						var err error
						if seq%2 == 0 {
							err = s.Write(ctx, seq, len(m), func(dst []byte) { copy(dst, m) })
						} else {
							err = s.Send(ctx, seq, m)
						}
						if err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
				for seq := uint64(1); seq <= n; seq++ {
					got, msg, err := r.Recv(ctx)
					if err != nil {
						t.Fatalf("message %d: %v", seq, err)
					}
					if want := message(7, seq, caps.FrameBytes); got != seq || !bytes.Equal(msg, want) {
						t.Fatalf("message %d: got number %d, %d bytes, want %d bytes (equal: %v)", seq, got, len(msg), len(want), bytes.Equal(msg, want))
					}
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// Ready says whether Recv can start without waiting, never waits, and
// leaves the frame for Recv: on a message of one frame and of several.
func TestReceiverReady(t *testing.T) {
	for name, p := range pairs(t, testCaps) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := NewSender(p[0])
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReceiver(p[1], 0)
			if err != nil {
				t.Fatal(err)
			}
			for seq, size := range []int{10, 3*testCaps.FrameBytes + 5, 0} {
				if ok, err := r.Ready(); ok || err != nil {
					t.Fatalf("message %d: ready %v (%v) before it was sent", seq, ok, err)
				}
				m := bytes.Repeat([]byte{byte(seq + 1)}, size)
				if err := s.Send(ctx, uint64(seq), m); err != nil {
					t.Fatal(err)
				}
				for range 2 { // asking again changes nothing
					if ok, err := r.Ready(); !ok || err != nil {
						t.Fatalf("message %d: ready %v (%v) after it was sent", seq, ok, err)
					}
				}
				got, msg, err := r.Recv(ctx)
				if err != nil || got != uint64(seq) || !bytes.Equal(msg, m) {
					t.Fatalf("message %d: got %d, %d bytes, %v", seq, got, len(msg), err)
				}
			}
			p[0].Close()
			if _, err := r.Ready(); !errors.Is(err, ErrClosed) {
				t.Fatalf("after the peer closed: %v, want ErrClosed", err)
			}
		})
	}
}

func TestConnRules(t *testing.T) {
	for name, p := range pairs(t, AppleCaps) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			reg, err := a.Register(2 * AppleCaps.FrameBytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.PostSend(1, reg, 0, AppleCaps.FrameBytes); !errors.Is(err, ErrNoCredit) {
				t.Fatalf("send without a posted receive: %v, want ErrNoCredit", err)
			}
			if err := b.PostRecv(9, 3); err != nil {
				t.Fatal(err)
			}
			if err := b.PostRecv(9, 3); err == nil {
				t.Fatal("posting a slot twice was accepted")
			}
			if err := a.PostSend(1, reg, 0, 100); !errors.Is(err, ErrBadSend) {
				t.Fatalf("short send on an equal-size link: %v, want ErrBadSend", err)
			}
			if err := a.PostSend(1, reg, 0, AppleCaps.FrameBytes+64); !errors.Is(err, ErrBadSend) {
				t.Fatalf("send over the frame size: %v, want ErrBadSend", err)
			}
			copy(reg.Buf, "hello")
			if err := a.PostSend(5, reg, 0, AppleCaps.FrameBytes); err != nil {
				t.Fatal(err)
			}
			cs := make([]Completion, 4)
			if n, err := a.Poll(cs); err != nil || n != 1 || cs[0].WR != 5 || cs[0].Op != OpSend {
				t.Fatalf("send completion: %d %v %+v", n, err, cs[0])
			}
			if err := b.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n, err := b.Poll(cs); err != nil || n != 1 || cs[0].WR != 9 || cs[0].Slot != 3 || cs[0].Bytes != AppleCaps.FrameBytes {
				t.Fatalf("receive completion: %d %v %+v", n, err, cs[0])
			}
			if got := b.RecvBuf(3)[:5]; string(got) != "hello" {
				t.Fatalf("slot holds %q", got)
			}
			if c := a.Caps(); c.Depth > 32 || c.FrameBytes != 4096 || !c.EqualSizes || c.Write {
				t.Fatalf("Apple caps %+v", c)
			}
			// The queue depth bounds posted receives.
			for i := 0; i < AppleCaps.Depth; i++ {
				if i != 3 {
					if err := b.PostRecv(uint64(i), i); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := b.PostRecv(0, AppleCaps.Depth); err == nil {
				t.Fatal("posted a slot beyond the queue depth")
			}
			a.Close()
			if _, err := b.Poll(cs); !errors.Is(err, ErrClosed) {
				t.Fatalf("poll after the peer closed: %v", err)
			}
		})
	}
}

// TestFaultsDetected sends a stream over the fault backend with one fault
// at frame k: every message delivered must be the one sent, in order, and
// the fault must be reported at the message it hit (never delivered).
func TestFaultsDetected(t *testing.T) {
	for _, caps := range []Caps{testCaps, AppleCaps} {
		for _, fault := range []Fault{Drop, Truncate, Corrupt, Reorder, Stall} {
			for _, k := range []int{0, 1, 5, 13} {
				t.Run(fmt.Sprintf("frame%d/%v/%d", caps.FrameBytes, fault, k), func(t *testing.T) {
					a, b, err := Loop(caps)
					if err != nil {
						t.Fatal(err)
					}
					fa, err := Faulty(a, func(n int) Fault {
						if n == k {
							return fault
						}
						return Deliver
					})
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					s, _ := NewSender(fa)
					r, _ := NewReceiver(b, 1)
					r.Stall = 200 * time.Millisecond
					const n = 40
					// The message that holds frame k.
					per := caps.FrameBytes - frameHeader
					hit, frames := uint64(0), 0
					for seq := uint64(1); seq <= n && hit == 0; seq++ {
						frames += max(1, (len(message(3, seq, caps.FrameBytes))+per-1)/per)
						if frames > k {
							hit = seq
						}
					}
					go func() {
						for seq := uint64(1); seq <= n; seq++ {
							if s.Send(ctx, seq, message(3, seq, caps.FrameBytes)) != nil {
								return
							}
						}
					}()
					for seq := uint64(1); ; seq++ {
						got, msg, err := r.Recv(ctx)
						if err != nil {
							var fe *FaultError
							if !errors.As(err, &fe) {
								t.Fatalf("after %d messages: %v, want a FaultError", seq-1, err)
							}
							if fe.Next != hit {
								t.Fatalf("fault reported at message %d, the fault hit message %d (%v)", fe.Next, hit, err)
							}
							return
						}
						if got != seq || !bytes.Equal(msg, message(3, seq, caps.FrameBytes)) {
							t.Fatalf("message %d delivered wrong (number %d, %d bytes)", seq, got, len(msg))
						}
						if seq >= hit {
							t.Fatalf("message %d delivered, but the fault hit message %d", seq, hit)
						}
					}
				})
			}
		}
	}
}

// TestShmTwoProcesses sends a stream to a child process (this test binary
// run again) that checks every message bit for bit.
func TestShmTwoProcesses(t *testing.T) {
	for _, caps := range []Caps{testCaps, AppleCaps} {
		t.Run(strconv.Itoa(caps.FrameBytes), func(t *testing.T) {
			token := make([]byte, tokenBytes)
			rand.Read(token)
			a, err := CreateShm(caps, token)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			const n = 500
			cmd := exec.Command(os.Args[0], "-test.run=^TestShmChild$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("VERBS_CHILD=%x", token), "VERBS_CHILD_N="+strconv.Itoa(n))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, _ := NewSender(a)
			s.Stall = 20 * time.Second // the child takes a while to start
			for seq := uint64(1); seq <= n; seq++ {
				if err := s.Send(ctx, seq, message(11, seq, caps.FrameBytes)); err != nil {
					t.Fatalf("send %d: %v\nchild: %s", seq, err, out.String())
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v\n%s", err, out.String())
			}
			if !bytes.Contains(out.Bytes(), []byte(fmt.Sprintf("child got %d messages", n))) {
				t.Fatalf("child did not confirm:\n%s", out.String())
			}
		})
	}
}

// TestShmChild is the child of TestShmTwoProcesses.
func TestShmChild(t *testing.T) {
	hexToken := os.Getenv("VERBS_CHILD")
	if hexToken == "" {
		t.Skip("run by TestShmTwoProcesses")
	}
	var token []byte
	fmt.Sscanf(hexToken, "%x", &token)
	n, _ := strconv.Atoi(os.Getenv("VERBS_CHILD_N"))
	b, err := OpenShm(token)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.Unlink()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := NewReceiver(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	frame := b.Caps().FrameBytes
	for seq := uint64(1); seq <= uint64(n); seq++ {
		got, msg, err := r.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		if got != seq || !bytes.Equal(msg, message(11, seq, frame)) {
			t.Fatalf("message %d differs", seq)
		}
	}
	fmt.Printf("child got %d messages\n", n)
}

// TestReceiverLends: a slot lent out of a Receiver is not posted again,
// so the peer never writes into it while it is read, until it is
// returned; a message of several frames has no slot to lend; Close waits
// for the last lent slot before it closes the Conn.
func TestReceiverLends(t *testing.T) {
	for name, p := range pairs(t, testCaps) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := NewSender(a)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReceiver(b, 1)
			if err != nil {
				t.Fatal(err)
			}
			small := func(seq uint64) []byte { return bytes.Repeat([]byte{byte(seq)}, 100) }
			recv := func(seq uint64) []byte {
				t.Helper()
				if err := s.Send(ctx, seq, small(seq)); err != nil {
					t.Fatal(err)
				}
				got, msg, err := r.Recv(ctx)
				if err != nil || got != seq || !bytes.Equal(msg, small(seq)) {
					t.Fatalf("message %d: got %d, %v", seq, got, err)
				}
				return msg
			}
			first := recv(1)
			slot, ok := r.Lend()
			if !ok || r.Lent() != 1 {
				t.Fatalf("lend: slot %d ok %v lent %d", slot, ok, r.Lent())
			}
			if _, ok := r.Lend(); ok {
				t.Fatal("lent the same message twice")
			}
			// Many more messages pass through the other slots; the lent
			// one keeps message 1.
			for seq := uint64(2); seq < 4*uint64(testCaps.Depth); seq++ {
				recv(seq)
				if !bytes.Equal(first, small(1)) {
					t.Fatalf("the lent slot was written while lent (after message %d)", seq)
				}
			}
			r.Return(slot)
			next := 4 * uint64(testCaps.Depth)
			recv(next)
			if r.Lent() != 0 {
				t.Fatalf("%d slots lent after the return", r.Lent())
			}
			// Several frames: put together in a buffer, nothing to lend.
			next++
			if err := s.Send(ctx, next, make([]byte, 3*testCaps.FrameBytes)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.Recv(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.Lend(); ok {
				t.Fatal("lent a slot for a message of several frames")
			}
			// Close with a slot lent: the Conn stays open (its memory is
			// being read) until the slot comes back.
			next++
			last := recv(next)
			slot, _ = r.Lend()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			cs := make([]Completion, testCaps.Depth)
			if _, err := a.Poll(cs); errors.Is(err, ErrClosed) {
				t.Fatal("the Conn closed while a slot was lent")
			}
			if !bytes.Equal(last, small(next)) {
				t.Fatal("the lent message changed")
			}
			r.Return(slot)
			if _, err := a.Poll(cs); !errors.Is(err, ErrClosed) {
				t.Fatalf("poll after the last slot came back: %v, want ErrClosed", err)
			}
		})
	}
}

// TestOpenShmRefusesForeignRings: a ring (or a wake-up pipe) that is not
// this user's alone is not mapped. A co-located peer that offered a ring
// file of its own could truncate it under the mapping, and the process
// touching the shrunk mapping dies of SIGBUS (attack 1 of the second
// hardening round).
func TestOpenShmRefusesForeignRings(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"group-readable": func(t *testing.T, path string) { must(t, os.Chmod(path, 0o640)) },
		"world-writable pipe": func(t *testing.T, path string) {
			must(t, os.Chmod(wakePaths(path)[1], 0o666))
		},
		"symlink": func(t *testing.T, path string) {
			must(t, os.Rename(path, path+".real"))
			must(t, os.Symlink(path+".real", path))
			t.Cleanup(func() { os.Remove(path + ".real") })
		},
		"pipe replaced by a file": func(t *testing.T, path string) {
			p := wakePaths(path)[0]
			must(t, os.Remove(p))
			must(t, os.WriteFile(p, nil, 0o600))
		},
		"another user's": func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			must(t, os.Chown(path, 65534, 65534))
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			token := make([]byte, tokenBytes)
			rand.Read(token)
			a, err := CreateShm(testCaps, token)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			spoil(t, a.Path())
			b, err := OpenShm(token)
			if err == nil {
				b.Close()
				t.Fatal("OpenShm mapped a ring that is not this user's alone")
			}
			t.Log(err)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A message's announced length costs nothing until its frames arrive: a
// first frame announcing 4 GiB in 65,536 frames, and nothing after it,
// takes one frame's bytes (found by reading in the second hardening
// round: the receiver allocated the announced length on the first frame).
func TestAnnouncedMessageNotAllocated(t *testing.T) {
	caps := Caps{FrameBytes: 1 << 16, Depth: 4, Reliable: true}
	a, b, err := Loop(caps)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	r, err := NewReceiver(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Stall = 200 * time.Millisecond
	reg, _ := a.Register(caps.FrameBytes)
	msgLen := maxFrames * (caps.FrameBytes - frameHeader)
	n := putFrame(reg.Buf, 1, msgLen, 0, maxFrames, make([]byte, caps.FrameBytes-frameHeader))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := a.PostSend(1, reg, 0, n); err == nil {
			break
		} else if !errors.Is(err, ErrNoCredit) {
			t.Fatal(err)
		}
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	_, _, err = r.Recv(ctx)
	if !errors.Is(err, ErrStall) {
		t.Fatalf("a message cut after its first frame: %v", err)
	}
	grew := int64(heap()) - int64(before)
	runtime.KeepAlive(r) // what it kept counts
	if grew > 16<<20 {
		t.Fatalf("a first frame announcing %d MiB took %d MiB", msgLen>>20, grew>>20)
	}
}

// TestInPlaceSenderRegistersOnlyForLongMessages: on a ring (an InPlace
// Conn) a Sender holds no frame buffers while every message fits one
// frame (each 16 MiB per shared-memory peer the heap held); a message of
// several frames registers them and arrives whole.
func TestInPlaceSenderRegistersOnlyForLongMessages(t *testing.T) {
	a, b, err := Loop(Caps{FrameBytes: 4096, Depth: 4})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(a)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	short := []byte("one frame")
	if err := s.Write(ctx, 1, len(short), func(dst []byte) { copy(dst, short) }); err != nil {
		t.Fatal(err)
	}
	if _, got, err := r.Recv(ctx); err != nil || !bytes.Equal(got, short) {
		t.Fatalf("short message: %q, %v", got, err)
	}
	if err := s.Send(ctx, 2, short); err != nil { // Send takes the same path
		t.Fatal(err)
	}
	if _, got, err := r.Recv(ctx); err != nil || !bytes.Equal(got, short) {
		t.Fatalf("short message sent: %q, %v", got, err)
	}
	if s.region != nil {
		t.Fatal("one-frame messages registered the frame buffers")
	}
	long := bytes.Repeat([]byte("0123456789"), 1000) // 3 frames
	if err := s.Send(ctx, 3, long); err != nil {
		t.Fatal(err)
	}
	if _, got, err := r.Recv(ctx); err != nil || !bytes.Equal(got, long) {
		t.Fatalf("long message: %d bytes, %v", len(got), err)
	}
	if s.region == nil {
		t.Fatal("a message of several frames went without frame buffers")
	}
}
