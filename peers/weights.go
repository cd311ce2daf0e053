package peers

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

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// WeightsProtocol serves byte ranges of the model files a node holds, so
// a node that hosts some layers fetches only their bytes from peers.
//
// One request per stream. Request: op (1 byte), model name (u16 length +
// bytes), then for opRead part (u16), offset (u64), length (u32). Reply:
// status (1 byte); on statusOK the bytes (opRead: exactly length;
// opManifest: u32 length + bytes); otherwise a u16-length message. All
// integers are big-endian. Libp2p's stream flow control is the
// back-pressure: a server writes no faster than the client reads.
const WeightsProtocol = "/strata/weights/1.0.0"

// Bounds of the weights protocol.
const (
	// MaxWeightRange is the most bytes one read may ask for.
	MaxWeightRange = 16 << 20
	// MaxWeightManifest caps a manifest (tensor digests) reply.
	MaxWeightManifest = 64 << 20
	// weightChunk is how FetchWeights cuts ranges between holders.
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
	ErrWeightsRefused = errors.New("peers: weights request refused")
	ErrNoHolder       = errors.New("peers: no peer could serve the weights")
)

// WeightSource is what a node serves over WeightsProtocol.
type WeightSource interface {
	// WeightFile returns the path of the file of part (0-based) of model
	// when the node holds bytes [off, off+size) of it (the complete file,
	// or verified ranges of a partly held one), else an error saying why.
	WeightFile(model string, part int, off, size int64) (string, error)
	// WeightManifest returns the model's manifest (the digests of its
	// tensors, in a form the caller defines), at most MaxWeightManifest bytes.
	WeightManifest(model string) ([]byte, error)
}

// weights holds the serving side's state.
type weights struct {
	src    WeightSource
	slots  chan struct{}
	served atomic.Int64 // bytes of ranges served
	fetchd atomic.Int64 // bytes of ranges fetched
}

func (n *Node) startWeights() {
	n.weights = &weights{src: n.cfg.Weights, slots: make(chan struct{}, weightServeStreams)}
	n.host.SetStreamHandler(WeightsProtocol, n.serveWeights)
}

// WeightsServed is the bytes of weight ranges this node sent to peers.
func (n *Node) WeightsServed() int64 { return n.weights.served.Load() }

// WeightsFetched is the bytes of weight ranges this node got from peers.
func (n *Node) WeightsFetched() int64 { return n.weights.fetchd.Load() }

func (n *Node) serveWeights(s network.Stream) {
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
	if n.weights.src == nil {
		fail(statusError, "this node serves no weights")
		return
	}
	// A slot before any lookup, for manifests too (a complete model's
	// first one reads the whole file): a flood of requests costs no
	// catalogue work and holds at most weightServeStreams goroutines.
	select {
	case n.weights.slots <- struct{}{}:
		defer func() { <-n.weights.slots }()
	default:
		fail(statusBusy, "busy")
		return
	}
	switch op {
	case opManifest:
		m, err := n.weights.src.WeightManifest(name)
		if err != nil || len(m) > MaxWeightManifest {
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
		if off < 0 || size > MaxWeightRange {
			fail(statusError, fmt.Sprintf("bad range: %d bytes at %d (at most %d)", size, off, MaxWeightRange))
			return
		}
		path, err := n.weights.src.WeightFile(name, part, off, size)
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
		n.weights.served.Add(sent)
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
		return 0, "", ErrBadFrame
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, "", err
	}
	return h[0], string(b), nil
}

func appendWeightsHead(b []byte, op byte, model string) ([]byte, error) {
	if model == "" || len(model) > maxWeightName {
		return nil, fmt.Errorf("%w: model name of %d bytes", ErrWeightsRefused, len(model))
	}
	b = append(b, op, 0, 0)
	binary.BigEndian.PutUint16(b[len(b)-2:], uint16(len(model)))
	return append(b, model...), nil
}

// weightsCall opens a stream to p, sends req, and returns the stream
// positioned after a statusOK byte (the caller reads the body and closes
// it), or the peer's refusal.
func (n *Node) weightsCall(ctx context.Context, p peer.ID, req []byte, bodyBytes int) (network.Stream, error) {
	s, err := n.host.NewStream(ctx, p, WeightsProtocol)
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
		return nil, fmt.Errorf("%w: %s is busy", ErrWeightsRefused, p)
	}
	return nil, fmt.Errorf("%w by %s: %s", ErrWeightsRefused, p, msg)
}

// ReadWeights reads len(dst) bytes at off of part (0-based) of model from
// peer p. len(dst) is at most MaxWeightRange.
func (n *Node) ReadWeights(ctx context.Context, p peer.ID, model string, part int, off int64, dst []byte) error {
	if len(dst) > MaxWeightRange || part < 0 || part > 0xffff || off < 0 {
		return fmt.Errorf("%w: part %d, %d bytes at %d", ErrWeightsRefused, part, len(dst), off)
	}
	req, err := appendWeightsHead(nil, opRead, model)
	if err != nil {
		return err
	}
	req = binary.BigEndian.AppendUint16(req, uint16(part))
	req = binary.BigEndian.AppendUint64(req, uint64(off))
	req = binary.BigEndian.AppendUint32(req, uint32(len(dst)))
	s, err := n.weightsCall(ctx, p, req, len(dst))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	got, err := io.ReadFull(s, dst)
	n.weights.fetchd.Add(int64(got))
	if err != nil {
		s.Reset()
		return fmt.Errorf("peers: weights from %s: %w", p, err)
	}
	s.Close()
	return nil
}

// WeightManifest asks peer p for the model's manifest.
func (n *Node) WeightManifest(ctx context.Context, p peer.ID, model string) ([]byte, error) {
	req, err := appendWeightsHead(nil, opManifest, model)
	if err != nil {
		return nil, err
	}
	s, err := n.weightsCall(ctx, p, req, MaxWeightManifest)
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
	if size > MaxWeightManifest {
		s.Reset()
		return nil, fmt.Errorf("%w: manifest of %d bytes from %s", ErrBadFrame, size, p)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(s, b); err != nil {
		s.Reset()
		return nil, err
	}
	s.Close()
	return b, nil
}

// WeightRange is one byte range of a model part to fetch into Data.
type WeightRange struct {
	Part   int
	Offset int64
	Data   []byte // len(Data) bytes are fetched
}

// FetchWeights fills every range's Data from the holders, several at
// once: ranges are cut into pieces of a few MiB, each holder serves up to
// two pieces at a time, and a piece a holder fails (gone, busy, refused)
// goes to another holder (a piece fails when every holder failed it).
// check, when set, verifies each completed
// range (a digest); a range that fails it is fetched again from another
// holder. It returns once all are filled or no holder can serve a piece.
func (n *Node) FetchWeights(ctx context.Context, holders []peer.ID, model string, ranges []WeightRange, check func(i int) error) error {
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
					err := n.ReadWeights(ctx, h, model, r.Part, r.Offset+int64(p.off), r.Data[p.off:p.end])
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
