package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/spf13/cobra"

	"strata/peers"
	"strata/peers/verbs"
)

// linkResult is one line of strata bench link --json.
type linkResult struct {
	Transport string  `json:"transport"`
	Bytes     int     `json:"bytes"`
	Messages  int     `json:"messages"`
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	GBps      float64 `json:"throughput_gb_s"`
}

const benchLinkProtocol = "/strata/bench-link/1.0.0"

func benchLinkCmd() *cobra.Command {
	var (
		transport string
		size, n   int
		asJSON    bool
		child     string
	)
	cmd := &cobra.Command{
		Use:   "link --transport tcp|shm [--bytes N] [--messages M] [--json]",
		Short: "Measure the latency and throughput of a link between two processes on this host",
		Long: `link starts a second strata process and measures a link to it, the way
activations travel between nodes:

  tcp: a libp2p stream over TCP, with the private-network key, Noise and
       yamux, exactly as nodes connect (the fallback of every link);
  shm: the verbs side channel over shared memory (rings in /dev/shm, frames
       with sequence, length and CRC-32C written straight into the peer's
       receive slot, spin then futex wake-ups).

Latency: M messages of N bytes, each echoed back before the next; p50 and
p99 are of the one-way time (half the round trip). Throughput: M messages
sent back to back, the receiver confirming the last.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if child != "" {
				return linkChild(cmd.Context(), transport, child, size)
			}
			if size <= 0 || n <= 0 {
				return fmt.Errorf("--bytes and --messages must be positive")
			}
			res, err := benchLink(cmd.Context(), transport, size, n)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s, %d-byte messages ×%d: one-way p50 %.1f µs, p99 %.1f µs; %.2f GB/s\n",
				res.Transport, res.Bytes, res.Messages, res.P50Micros, res.P99Micros, res.GBps)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&transport, "transport", "shm", "tcp or shm")
	f.IntVar(&size, "bytes", 8192, "bytes per message")
	f.IntVar(&n, "messages", 2000, "messages per measurement")
	f.BoolVar(&asJSON, "json", false, `print {"transport", "bytes", "p50_us", "p99_us", "throughput_gb_s"}`)
	f.StringVar(&child, "child", "", "internal: run as the echoing process")
	f.MarkHidden("child")
	return cmd
}

// benchLink runs the echoing process and measures.
func benchLink(ctx context.Context, transport string, size, n int) (linkResult, error) {
	res := linkResult{Transport: transport, Bytes: size, Messages: n}
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	var (
		arg     string
		cleanup func()
		ep      linkEnd
	)
	switch transport {
	case "shm":
		caps := verbs.Caps{FrameBytes: roundUp64(size + 64), Depth: 16}
		t1, t2 := make([]byte, 32), make([]byte, 32)
		rand.Read(t1)
		rand.Read(t2)
		out, err := verbs.CreateShm(caps, t1) // we send in its direction 0
		if err != nil {
			return res, err
		}
		back, err := verbs.CreateShm(caps, t2) // the child sends in its direction 1
		if err != nil {
			out.Close()
			return res, err
		}
		cleanup = func() { out.Close(); back.Close() }
		arg = hex.EncodeToString(t1) + "," + hex.EncodeToString(t2)
		ep, err = newShmEnd(out, back)
		if err != nil {
			cleanup()
			return res, err
		}
	case "tcp":
		arg = "tcp"
	default:
		return res, fmt.Errorf("--transport %q: want tcp or shm", transport)
	}
	cmd := exec.CommandContext(ctx, self, "bench", "link", "--transport", transport, "--bytes", fmt.Sprint(size), "--child", arg)
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if cleanup != nil {
			cleanup()
		}
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		return res, fmt.Errorf("the echoing process did not start: %s", strings.TrimSpace(stderr.String()))
	}
	if transport == "tcp" {
		var node *peers.Node
		ep, node, err = dialTCPEnd(ctx, lines.Text())
		if err != nil {
			return res, err
		}
		defer node.Close()
	}
	msg := make([]byte, size)
	rand.Read(msg)
	// Warm up, then the round trips.
	for i := 0; i < min(n, 200); i++ {
		if err := ep.roundTrip(ctx, msg); err != nil {
			return res, err
		}
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t := time.Now()
		if err := ep.roundTrip(ctx, msg); err != nil {
			return res, err
		}
		lat[i] = time.Since(t) / 2
	}
	slices.Sort(lat)
	res.P50Micros = float64(lat[n/2].Nanoseconds()) / 1e3
	res.P99Micros = float64(lat[min(n-1, n*99/100)].Nanoseconds()) / 1e3
	t := time.Now()
	if err := ep.stream(ctx, msg, n); err != nil {
		return res, err
	}
	res.GBps = float64(size) * float64(n) / time.Since(t).Seconds() / 1e9
	return res, nil
}

func roundUp64(n int) int { return max(256, (n+63)/64*64) }

// linkEnd is the measuring side of a link.
type linkEnd interface {
	// roundTrip sends msg and waits for it to come back.
	roundTrip(ctx context.Context, msg []byte) error
	// stream sends msg n times and waits for the receiver's confirmation.
	stream(ctx context.Context, msg []byte, n int) error
}

// Message kinds of the bench protocol (first byte of a message).
const (
	benchEcho   = 'e'
	benchStream = 's'
	benchLast   = 'l'
)

type shmEnd struct {
	tx  *verbs.Sender
	rx  *verbs.Receiver
	seq uint64
}

func newShmEnd(tx, rx verbs.Conn) (*shmEnd, error) {
	s, err := verbs.NewSender(tx)
	if err != nil {
		return nil, err
	}
	s.Stall = 30 * time.Second // the child takes a while to start
	r, err := verbs.NewReceiver(rx, 1)
	if err != nil {
		return nil, err
	}
	r.Stall = 30 * time.Second
	return &shmEnd{tx: s, rx: r}, nil
}

func (e *shmEnd) roundTrip(ctx context.Context, msg []byte) error {
	msg[0] = benchEcho
	e.seq++
	if err := e.tx.Write(ctx, e.seq, len(msg), func(dst []byte) { copy(dst, msg) }); err != nil {
		return err
	}
	_, got, err := e.rx.Recv(ctx)
	if err == nil && len(got) != len(msg) {
		err = fmt.Errorf("echo of %d bytes for %d", len(got), len(msg))
	}
	return err
}

func (e *shmEnd) stream(ctx context.Context, msg []byte, n int) error {
	for i := 0; i < n; i++ {
		msg[0] = benchStream
		if i == n-1 {
			msg[0] = benchLast
		}
		e.seq++
		if err := e.tx.Write(ctx, e.seq, len(msg), func(dst []byte) { copy(dst, msg) }); err != nil {
			return err
		}
	}
	_, _, err := e.rx.Recv(ctx)
	return err
}

type tcpEnd struct {
	s   network.Stream
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte
}

// benchNode starts a libp2p node as strata nodes run (private network,
// Noise, yamux over TCP) on loopback.
func benchNode(ctx context.Context, secret []byte) (*peers.Node, error) {
	return peers.New(ctx, peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: secret, NoMDNS: true,
		Transport: peers.TransportTCP, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func dialTCPEnd(ctx context.Context, line string) (*tcpEnd, *peers.Node, error) {
	secretHex, addr, _ := strings.Cut(line, " ")
	secret, err := hex.DecodeString(secretHex)
	if err != nil {
		return nil, nil, fmt.Errorf("echoing process said %q", line)
	}
	ai, err := peers.ParseJoin(addr)
	if err != nil {
		return nil, nil, err
	}
	node, err := benchNode(ctx, secret)
	if err != nil {
		return nil, nil, err
	}
	if err := node.Connect(ctx, ai); err != nil {
		node.Close()
		return nil, nil, err
	}
	s, err := node.Host().NewStream(ctx, ai.ID, benchLinkProtocol)
	if err != nil {
		node.Close()
		return nil, nil, err
	}
	return &tcpEnd{s: s, r: bufio.NewReaderSize(s, 1<<20), w: bufio.NewWriterSize(s, 1<<20)}, node, nil
}

func (e *tcpEnd) write(msg []byte) error {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], uint32(len(msg)))
	e.w.Write(h[:])
	_, err := e.w.Write(msg)
	return err
}

func (e *tcpEnd) read() ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(e.r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:]))
	if cap(e.buf) < n {
		e.buf = make([]byte, n)
	}
	_, err := io.ReadFull(e.r, e.buf[:n])
	return e.buf[:n], err
}

func (e *tcpEnd) roundTrip(_ context.Context, msg []byte) error {
	msg[0] = benchEcho
	if err := e.write(msg); err != nil {
		return err
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	got, err := e.read()
	if err == nil && len(got) != len(msg) {
		err = fmt.Errorf("echo of %d bytes for %d", len(got), len(msg))
	}
	return err
}

func (e *tcpEnd) stream(_ context.Context, msg []byte, n int) error {
	for i := 0; i < n; i++ {
		msg[0] = benchStream
		if i == n-1 {
			msg[0] = benchLast
		}
		if err := e.write(msg); err != nil {
			return err
		}
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	_, err := e.read()
	return err
}

// linkChild is the echoing process: it echoes benchEcho messages, and
// answers benchLast with one byte.
func linkChild(ctx context.Context, transport, arg string, size int) error {
	ack := []byte{benchLast}
	if transport == "shm" {
		t1, t2, _ := strings.Cut(arg, ",")
		b1, err1 := hex.DecodeString(t1)
		b2, err2 := hex.DecodeString(t2)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		in, err := verbs.OpenShm(b1)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := verbs.OpenShm(b2)
		if err != nil {
			return err
		}
		defer out.Close()
		tx, err := verbs.NewSender(out)
		if err != nil {
			return err
		}
		rx, err := verbs.NewReceiver(in, 1)
		if err != nil {
			return err
		}
		rx.Stall = time.Minute
		fmt.Println("ready")
		var seq uint64
		for {
			_, msg, err := rx.Recv(ctx)
			if err != nil {
				return err
			}
			switch msg[0] {
			case benchEcho:
				seq++
				err = tx.Write(ctx, seq, len(msg), func(dst []byte) { copy(dst, msg) })
			case benchLast:
				seq++
				err = tx.Send(ctx, seq, ack)
			}
			if err != nil {
				return err
			}
		}
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	node, err := benchNode(ctx, secret)
	if err != nil {
		return err
	}
	defer node.Close()
	done := make(chan error, 1)
	node.Host().SetStreamHandler(benchLinkProtocol, func(s network.Stream) {
		e := &tcpEnd{s: s, r: bufio.NewReaderSize(s, 1<<20), w: bufio.NewWriterSize(s, 1<<20)}
		for {
			msg, err := e.read()
			if err != nil {
				done <- err
				return
			}
			switch msg[0] {
			case benchEcho:
				err = e.write(msg)
			case benchLast:
				err = e.write(ack)
			default:
				continue
			}
			if err == nil {
				err = e.w.Flush()
			}
			if err != nil {
				done <- err
				return
			}
		}
	})
	fmt.Println(hex.EncodeToString(secret), node.Addrs()[0])
	select {
	case err := <-done:
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}
