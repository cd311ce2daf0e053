package peers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ProbeProtocol measures the throughput of the libp2p stream between two
// members (strata doctor): the prober sends an 8-byte length and that
// many bytes, the other side discards them and answers with the count.
const ProbeProtocol = "/strata/probe/1.0.0"

// MaxProbeBytes bounds one probe; a node takes one probe at a time, so a
// peer cannot keep it busy receiving more than this per round trip.
const MaxProbeBytes = 16 << 20

func (n *Node) handleProbe(s network.Stream) {
	defer s.Close()
	select {
	case n.probing <- struct{}{}:
		defer func() { <-n.probing }()
	default:
		s.Reset() // one probe at a time
		return
	}
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var hdr [8]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		s.Reset()
		return
	}
	size := binary.LittleEndian.Uint64(hdr[:])
	if size > MaxProbeBytes {
		s.Reset()
		return
	}
	got, err := io.CopyN(io.Discard, s, int64(size))
	if err != nil {
		s.Reset()
		return
	}
	binary.LittleEndian.PutUint64(hdr[:], uint64(got))
	s.Write(hdr[:])
}

// ProbeThroughput sends size bytes (at most MaxProbeBytes) to member p
// over a libp2p stream and returns the rate in bytes/s, timed from the
// first byte sent to p's answer (one round trip included).
func (n *Node) ProbeThroughput(ctx context.Context, p peer.ID, size int) (float64, error) {
	if size <= 0 || size > MaxProbeBytes {
		return 0, fmt.Errorf("probe of %d bytes: 1 to %d", size, MaxProbeBytes)
	}
	s, err := n.host.NewStream(ctx, p, ProbeProtocol)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	}
	buf := make([]byte, 256<<10)
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(size))
	start := time.Now()
	if _, err := s.Write(hdr[:]); err != nil {
		s.Reset()
		return 0, err
	}
	for left := size; left > 0; {
		k := min(left, len(buf))
		if _, err := s.Write(buf[:k]); err != nil {
			s.Reset()
			return 0, err
		}
		left -= k
	}
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		s.Reset()
		return 0, fmt.Errorf("no answer to the probe (busy with another, or gone): %w", err)
	}
	if got := binary.LittleEndian.Uint64(hdr[:]); got != uint64(size) {
		return 0, errors.New("the probe's answer does not match what was sent")
	}
	return float64(size) / time.Since(start).Seconds(), nil
}
