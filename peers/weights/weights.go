// Package weights is the protocol that serves byte ranges of the model
// files a node holds (/strata/weights/1.0.0), so a node that hosts some
// layers fetches only their bytes from its peers, several at once. A
// node starts it with Serve (what it serves, if anything) and fetches
// with the Service's Fetch; peers.Node.Weights is a node's.
package weights

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Protocol serves byte ranges of the model files a node holds, so
// a node that hosts some layers fetches only their bytes from peers.
//
// One request per stream. Request: op (1 byte), model name (u16 length +
// bytes), then for opRead part (u16), offset (u64), length (u32). Reply:
// status (1 byte); on statusOK the bytes (opRead: exactly length;
// opManifest: u32 length + bytes); otherwise a u16-length message. All
// integers are big-endian. Libp2p's stream flow control is the
// back-pressure: a server writes no faster than the client reads.
const Protocol = "/strata/weights/1.0.0"

// Bounds of the weights protocol.
const (
	// MaxRange is the most bytes one read may ask for.
	MaxRange = 16 << 20
	// MaxManifest caps a manifest (tensor digests) reply.
	MaxManifest = 64 << 20
	// weightChunk is how Fetch cuts ranges between holders.
	weightChunk = 4 << 20
	// weightServeStreams is how many reads a node serves at once; more
	// are answered "busy" and the client asks another holder.
	weightServeStreams = 16
	maxWeightName      = 512
)

const (
	opRead     = 1
	opManifest = 2

	statusOK    = 0
	statusError = 1
	statusBusy  = 2
)

// Errors of the weights protocol.
var (
	ErrRefused  = errors.New("weights: request refused")
	ErrNoHolder = errors.New("weights: no peer could serve the weights")
	// ErrBadReply is a reply that breaks the protocol's bounds.
	ErrBadReply = errors.New("weights: malformed request or reply")
)

// ioTimeout bounds each read or write of a stream, plus a second per
// 8 MiB of a transfer (as the actor bridge bounds its frames).
const ioTimeout = 5 * time.Second

func transferTimeout(n int) time.Duration { return ioTimeout + time.Duration(n>>23)*time.Second }

// Source is what a node serves over Protocol.
type Source interface {
	// WeightFile returns the path of the file of part (0-based) of model
	// when the node holds bytes [off, off+size) of it (the complete file,
	// or verified ranges of a partly held one), else an error saying why.
	WeightFile(model string, part int, off, size int64) (string, error)
	// WeightManifest returns the model's manifest (the digests of its
	// tensors, in a form the caller defines), at most MaxManifest bytes.
	WeightManifest(model string) ([]byte, error)
}

// Service is one node's side of the protocol: it serves its Source to
// peers and fetches ranges from them.
type Service struct {
	host   host.Host
	src    Source
	slots  chan struct{}
	served atomic.Int64 // bytes of ranges served
	fetchd atomic.Int64 // bytes of ranges fetched
}

// Serve starts the protocol on h: peers read src's ranges (src nil: the
// node serves none, and refuses in words).
func Serve(h host.Host, src Source) *Service {
	svc := &Service{host: h, src: src, slots: make(chan struct{}, weightServeStreams)}
	h.SetStreamHandler(Protocol, svc.serve)
	return svc
}

// Served is the bytes of weight ranges this node sent to peers.
func (svc *Service) Served() int64 { return svc.served.Load() }

// Fetched is the bytes of weight ranges this node got from peers.
func (svc *Service) Fetched() int64 { return svc.fetchd.Load() }

func (svc *Service) serve(s network.Stream) {
	s.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReaderSize(s, 1024)
	fail := func(status byte, msg string) {
		if len(msg) > 1000 {
			msg = msg[:1000]
		}
		b := []byte{status, 0, 0}
		binary.BigEndian.PutUint16(b[1:], uint16(len(msg)))
		s.Write(append(b, msg...))
		s.Close()
	}
	op, name, err := readWeightsHead(r)
	if err != nil {
		s.Reset()
		return
	}
	if svc.src == nil {
		fail(statusError, "this node serves no weights")
		return
	}
	// A slot before any lookup, for manifests too (a complete model's
	// first one reads the whole file): a flood of requests costs no
	// catalogue work and holds at most weightServeStreams goroutines.
	select {
	case svc.slots <- struct{}{}:
		defer func() { <-svc.slots }()
	default:
		fail(statusBusy, "busy")
		return
	}
	switch op {
	case opManifest:
		m, err := svc.src.WeightManifest(name)
		if err != nil || len(m) > MaxManifest {
			fail(statusError, fmt.Sprintf("no manifest for %q: %v", name, err))
			return
		}
		b := make([]byte, 5, 5+len(m))
		binary.BigEndian.PutUint32(b[1:], uint32(len(m)))
		s.SetWriteDeadline(time.Now().Add(transferTimeout(len(m))))
		if _, err := s.Write(append(b, m...)); err != nil {
			s.Reset()
			return
		}
		s.Close()
	case opRead:
		var fixed [14]byte
		if _, err := io.ReadFull(r, fixed[:]); err != nil {
			s.Reset()
			return
		}
		part := int(binary.BigEndian.Uint16(fixed[0:]))
		off := int64(binary.BigEndian.Uint64(fixed[2:]))
		size := int64(binary.BigEndian.Uint32(fixed[10:]))
		if off < 0 || size > MaxRange {
			fail(statusError, fmt.Sprintf("bad range: %d bytes at %d (at most %d)", size, off, MaxRange))
			return
		}
		path, err := svc.src.WeightFile(name, part, off, size)
		if err != nil {
			fail(statusError, err.Error())
			return
		}
		f, err := os.Open(path)
		if err != nil {
			fail(statusError, err.Error())
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || off+size > fi.Size() {
			fail(statusError, fmt.Sprintf("range %d+%d is past the end of part %d", off, size, part))
			return
		}
		s.SetWriteDeadline(time.Now().Add(transferTimeout(int(size))))
		if _, err := s.Write([]byte{statusOK}); err != nil {
			s.Reset()
			return
		}
		sent, err := io.Copy(s, io.NewSectionReader(f, off, size))
		svc.served.Add(sent)
		if err != nil {
			s.Reset()
			return
		}
		s.Close()
	default:
		s.Reset()
	}
}

func readWeightsHead(r io.Reader) (op byte, name string, err error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, "", err
	}
	l := int(binary.BigEndian.Uint16(h[1:]))
	if l == 0 || l > maxWeightName {
		return 0, "", ErrBadReply
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, "", err
	}
	return h[0], string(b), nil
}

func appendWeightsHead(b []byte, op byte, model string) ([]byte, error) {
	if model == "" || len(model) > maxWeightName {
		return nil, fmt.Errorf("%w: model name of %d bytes", ErrRefused, len(model))
	}
	b = append(b, op, 0, 0)
	binary.BigEndian.PutUint16(b[len(b)-2:], uint16(len(model)))
	return append(b, model...), nil
}

// weightsCall opens a stream to p, sends req, and returns the stream
// positioned after a statusOK byte (the caller reads the body and closes
// it), or the peer's refusal.
func (svc *Service) call(ctx context.Context, p peer.ID, req []byte, bodyBytes int) (network.Stream, error) {
	s, err := svc.host.NewStream(ctx, p, Protocol)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	s.SetDeadline(time.Now().Add(transferTimeout(bodyBytes)))
	if _, err := s.Write(req); err != nil {
		s.Reset()
		return nil, err
	}
	s.CloseWrite()
	var st [1]byte
	if _, err := io.ReadFull(s, st[:]); err != nil {
		s.Reset()
		return nil, err
	}
	if st[0] == statusOK {
		return s, nil
	}
	var l [2]byte
	msg := ""
	if _, err := io.ReadFull(s, l[:]); err == nil {
		b := make([]byte, min(int(binary.BigEndian.Uint16(l[:])), 1000))
		io.ReadFull(s, b)
		msg = string(b)
	}
	s.Close()
	if st[0] == statusBusy {
		return nil, fmt.Errorf("%w: %s is busy", ErrRefused, p)
	}
	return nil, fmt.Errorf("%w by %s: %s", ErrRefused, p, msg)
}

// Read reads len(dst) bytes at off of part (0-based) of model from
// peer p. len(dst) is at most MaxRange.
func (svc *Service) Read(ctx context.Context, p peer.ID, model string, part int, off int64, dst []byte) error {
	if len(dst) > MaxRange || part < 0 || part > 0xffff || off < 0 {
		return fmt.Errorf("%w: part %d, %d bytes at %d", ErrRefused, part, len(dst), off)
	}
	req, err := appendWeightsHead(nil, opRead, model)
	if err != nil {
		return err
	}
	req = binary.BigEndian.AppendUint16(req, uint16(part))
	req = binary.BigEndian.AppendUint64(req, uint64(off))
	req = binary.BigEndian.AppendUint32(req, uint32(len(dst)))
	s, err := svc.call(ctx, p, req, len(dst))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	got, err := io.ReadFull(s, dst)
	svc.fetchd.Add(int64(got))
	if err != nil {
		s.Reset()
		return fmt.Errorf("weights: from %s: %w", p, err)
	}
	s.Close()
	return nil
}

// Manifest asks peer p for the model's manifest.
func (svc *Service) Manifest(ctx context.Context, p peer.ID, model string) ([]byte, error) {
	req, err := appendWeightsHead(nil, opManifest, model)
	if err != nil {
		return nil, err
	}
	s, err := svc.call(ctx, p, req, MaxManifest)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	var l [4]byte
	if _, err := io.ReadFull(s, l[:]); err != nil {
		s.Reset()
		return nil, err
	}
	size := binary.BigEndian.Uint32(l[:])
	if size > MaxManifest {
		s.Reset()
		return nil, fmt.Errorf("%w: manifest of %d bytes from %s", ErrBadReply, size, p)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(s, b); err != nil {
		s.Reset()
		return nil, err
	}
	s.Close()
	return b, nil
}

// Range is one byte range of a model part to fetch into Data.
type Range struct {
	Part   int
	Offset int64
	Data   []byte // len(Data) bytes are fetched
}

// Fetch fills every range's Data from the holders, several at
// once: ranges are cut into pieces of a few MiB, each holder serves up to
// two pieces at a time, and a piece a holder fails (gone, busy, refused)
// goes to another holder (a piece fails when every holder failed it).
// check, when set, verifies each completed
// range (a digest); a range that fails it is fetched again from another
// holder. It returns once all are filled or no holder can serve a piece.
func (svc *Service) Fetch(ctx context.Context, holders []peer.ID, model string, ranges []Range, check func(i int) error) error {
	if len(holders) == 0 {
		return fmt.Errorf("%w: %s: nobody holds it", ErrNoHolder, model)
	}
	type piece struct {
		rng, off, end int // range index, byte span within its Data
		bad           map[peer.ID]bool
	}
	var (
		mu       sync.Mutex
		queue    []*piece
		pending  = make([]int, len(ranges)) // pieces left per range
		firstErr error
		left     int
	)
	for i, r := range ranges {
		for off := 0; off < len(r.Data); off += weightChunk {
			queue = append(queue, &piece{rng: i, off: off, end: min(off+weightChunk, len(r.Data)), bad: map[peer.ID]bool{}})
			pending[i]++
			left++
		}
	}
	if left == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := func(h peer.ID) *piece {
		mu.Lock()
		defer mu.Unlock()
		for i, p := range queue {
			if !p.bad[h] {
				queue = append(queue[:i], queue[i+1:]...)
				return p
			}
		}
		return nil
	}
	// finish records the first error (mu held) and stops the workers.
	finish := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	var wg sync.WaitGroup
	for _, h := range holders {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					p := next(h)
					if p == nil {
						mu.Lock()
						done := left == 0 || firstErr != nil
						mu.Unlock()
						if done {
							return
						}
						select { // wait for a piece to come back or the end
						case <-ctx.Done():
							return
						case <-time.After(20 * time.Millisecond):
						}
						continue
					}
					r := ranges[p.rng]
					err := svc.Read(ctx, h, model, r.Part, r.Offset+int64(p.off), r.Data[p.off:p.end])
					mu.Lock()
					if err != nil {
						p.bad[h] = true
						if len(p.bad) >= len(holders) {
							finish(fmt.Errorf("%w: %s part %d at %d: %v", ErrNoHolder, model, r.Part, r.Offset+int64(p.off), err))
							mu.Unlock()
							return
						}
						queue = append(queue, p)
						mu.Unlock()
						continue
					}
					left--
					pending[p.rng]--
					if pending[p.rng] == 0 && check != nil {
						if cerr := check(p.rng); cerr != nil {
							// Fetch the whole range again, from others.
							for off := 0; off < len(r.Data); off += weightChunk {
								q := &piece{rng: p.rng, off: off, end: min(off+weightChunk, len(r.Data)), bad: map[peer.ID]bool{h: true}}
								if len(q.bad) >= len(holders) {
									finish(fmt.Errorf("%w: %s part %d at %d: %v", ErrNoHolder, model, r.Part, r.Offset, cerr))
									break
								}
								queue = append(queue, q)
								pending[p.rng]++
								left++
							}
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return firstErr
	}
	if left > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s: %d pieces left", ErrNoHolder, model, left)
	}
	return nil
}
