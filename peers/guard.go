package peers

import (
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Before the private-network and Noise handshakes finish, a connection is
// anyone's who can reach the port. libp2p gives such a connection 15 s
// and counts it against the resource manager's inbound limits, so a few
// dozen silent connections could keep real peers out. The guard gives an
// inbound connection handshakeTimeout to authenticate, and each remote IP
// at most maxPendingPerIP connections in the handshake at once.
var handshakeTimeout = 3 * time.Second // a variable for tests

const maxPendingPerIP = 8

// guard tracks inbound connections still in their handshake. It wraps the
// TCP transport's upgrader (to see every accepted connection first) and is
// the host's connection gater (to hear when one is authenticated).
type guard struct {
	mu      sync.Mutex
	pending map[string]*guardedConn // by local + remote multiaddr
	perIP   map[string]int
}

func newGuard() *guard {
	return &guard{pending: make(map[string]*guardedConn), perIP: make(map[string]int)}
}

func connKey(local, remote ma.Multiaddr) string { return local.String() + " " + remote.String() }

// admit starts a handshake's clock, or refuses a connection from an IP
// that has too many handshakes in flight.
func (g *guard) admit(c manet.Conn) (manet.Conn, bool) {
	ip := remoteIP(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perIP[ip] >= maxPendingPerIP {
		return nil, false
	}
	gc := &guardedConn{Conn: c, g: g, ip: ip, key: connKey(c.LocalMultiaddr(), c.RemoteMultiaddr())}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	g.pending[gc.key] = gc
	g.perIP[ip]++
	return gc, true
}

// release ends a handshake: authenticated (the deadline is lifted) or
// closed.
func (g *guard) release(key string, authenticated bool) {
	g.mu.Lock()
	gc, ok := g.pending[key]
	if ok {
		delete(g.pending, key)
		if g.perIP[gc.ip]--; g.perIP[gc.ip] <= 0 {
			delete(g.perIP, gc.ip)
		}
	}
	g.mu.Unlock()
	if ok && authenticated {
		gc.Conn.SetDeadline(time.Time{})
	}
}

func remoteIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// guardedConn is an inbound connection in (or past) its handshake.
type guardedConn struct {
	manet.Conn
	g       *guard
	ip, key string
}

func (c *guardedConn) Close() error {
	c.g.release(c.key, false)
	return c.Conn.Close()
}

// The guard as connection gater: everything is allowed; an inbound
// connection that is secured (it passed the private-network key and Noise)
// leaves the handshake clock.
var _ interface {
	InterceptPeerDial(peer.ID) bool
	InterceptAddrDial(peer.ID, ma.Multiaddr) bool
	InterceptAccept(network.ConnMultiaddrs) bool
	InterceptSecured(network.Direction, peer.ID, network.ConnMultiaddrs) bool
	InterceptUpgraded(network.Conn) (bool, control.DisconnectReason)
} = (*guard)(nil)

func (g *guard) InterceptPeerDial(peer.ID) bool                                  { return true }
func (g *guard) InterceptAddrDial(peer.ID, ma.Multiaddr) bool                    { return true }
func (g *guard) InterceptAccept(network.ConnMultiaddrs) bool                     { return true }
func (g *guard) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

func (g *guard) InterceptSecured(dir network.Direction, _ peer.ID, addrs network.ConnMultiaddrs) bool {
	if dir == network.DirInbound {
		g.release(connKey(addrs.LocalMultiaddr(), addrs.RemoteMultiaddr()), true)
	}
	return true
}

// guardedUpgrader hands the TCP transport listeners whose connections go
// through the guard.
type guardedUpgrader struct {
	transport.Upgrader
	g *guard
}

func (u guardedUpgrader) GateMaListener(l manet.Listener) transport.GatedMaListener {
	return &guardedListener{GatedMaListener: u.Upgrader.GateMaListener(l), g: u.g}
}

type guardedListener struct {
	transport.GatedMaListener
	g *guard
}

func (l *guardedListener) Accept() (manet.Conn, network.ConnManagementScope, error) {
	for {
		c, scope, err := l.GatedMaListener.Accept()
		if err != nil {
			return nil, nil, err
		}
		if gc, ok := l.g.admit(c); ok {
			return gc, scope, nil
		}
		c.Close()
		if scope != nil {
			scope.Done()
		}
	}
}

// guardedTCP is the TCP transport constructor for libp2p.Transport.
func guardedTCP(g *guard) func(transport.Upgrader, network.ResourceManager) (*tcp.TcpTransport, error) {
	return func(up transport.Upgrader, rm network.ResourceManager) (*tcp.TcpTransport, error) {
		// No SO_REUSEPORT: a second node on a port in use must fail, not
		// share the port and take half of the first one's connections.
		return tcp.NewTCPTransport(guardedUpgrader{up, g}, rm, nil, tcp.DisableReuseport())
	}
}

// The TCP transport sets keepalive and linger on accepted connections when
// they can: pass them through to the socket.

func (c *guardedConn) SetKeepAlive(on bool) error {
	if k, ok := c.Conn.(interface{ SetKeepAlive(bool) error }); ok {
		return k.SetKeepAlive(on)
	}
	return nil
}

func (c *guardedConn) SetKeepAlivePeriod(d time.Duration) error {
	if k, ok := c.Conn.(interface{ SetKeepAlivePeriod(time.Duration) error }); ok {
		return k.SetKeepAlivePeriod(d)
	}
	return nil
}

func (c *guardedConn) SetLinger(sec int) error {
	if k, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return k.SetLinger(sec)
	}
	return nil
}
