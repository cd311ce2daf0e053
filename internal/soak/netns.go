package soak

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
)

// netLayout puts each node in a network namespace of its own, as if on
// its own machine (root only): two veth pairs per node, one to a
// "cluster" bridge (the links between members, shaped with tc tbf, cut
// and healed by the link fault) and one to an "api" bridge (its clients,
// never cut: a member cut off from the others still answers them). The
// nodes talk TCP (separate hosts have no shared memory between them).
type netLayout struct {
	tag string // unique per run: bridge, namespace and interface names
	// subnet: 198.18.<2·subnet>.0/24 is the cluster's, the next /24 the
	// api's; 198.18.0.0/15 is set aside for network benchmarks (RFC
	// 2544), so a machine's own networks are not in the way.
	subnet int
	rate   string // tc tbf rate of every cluster link
	undo   [][]string
}

// newNetLayout makes the bridges; nodes are added with addNode.
func newNetLayout(rate string) (*netLayout, error) {
	l := &netLayout{tag: fmt.Sprintf("%05d", os.Getpid()%100000), subnet: rand.IntN(128), rate: rate}
	for _, br := range []struct{ name, addr string }{{l.bridge("c"), l.ip(1, 1)}, {l.bridge("a"), l.ip(2, 1)}} {
		if err := l.run([]string{"ip", "link", "add", br.name, "type", "bridge"}, []string{"ip", "link", "del", br.name}); err != nil {
			l.close()
			return nil, err
		}
		if err := l.do("ip", "addr", "add", br.addr+"/24", "dev", br.name); err != nil {
			l.close()
			return nil, err
		}
		if err := l.do("ip", "link", "set", br.name, "up"); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

func (l *netLayout) bridge(kind string) string { return "sk" + l.tag + kind }
func (l *netLayout) ip(net, host int) string {
	return fmt.Sprintf("198.18.%d.%d", 2*l.subnet+net-1, host)
}
func (l *netLayout) ns(i int) string { return fmt.Sprintf("strata-soak-%s-n%d", l.tag, i) }

// clusterLink is node i's cluster veth on the host side: down cuts the
// node off from every other member.
func (l *netLayout) clusterLink(i int) string { return fmt.Sprintf("sk%sc%d", l.tag, i) }

// addNode makes node i's namespace and links; it returns the node's
// cluster and api addresses.
func (l *netLayout) addNode(i int) (clusterIP, apiIP string, err error) {
	ns := l.ns(i)
	if err := l.run([]string{"ip", "netns", "add", ns}, []string{"ip", "netns", "del", ns}); err != nil {
		return "", "", err
	}
	steps := [][]string{{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"}}
	for _, side := range []struct {
		kind string
		net  int
	}{{"c", 1}, {"a", 2}} {
		host, inside := fmt.Sprintf("sk%s%s%d", l.tag, side.kind, i), "eth"+side.kind
		addr := l.ip(side.net, 10+i)
		steps = append(steps,
			[]string{"ip", "link", "add", host, "type", "veth", "peer", "name", inside, "netns", ns},
			[]string{"ip", "link", "set", host, "master", l.bridge(side.kind), "up"},
			[]string{"ip", "netns", "exec", ns, "ip", "addr", "add", addr + "/24", "dev", inside},
			[]string{"ip", "netns", "exec", ns, "ip", "link", "set", inside, "up"})
		if side.kind == "c" && l.rate != "" {
			tbf := []string{"root", "tbf", "rate", l.rate, "burst", "256kb", "latency", "50ms"}
			steps = append(steps, append([]string{"tc", "qdisc", "add", "dev", host}, tbf...),
				append([]string{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", inside}, tbf...))
		}
	}
	for _, s := range steps {
		if err := l.do(s...); err != nil {
			return "", "", err
		}
	}
	return l.ip(1, 10+i), l.ip(2, 10+i), nil
}

// setLink brings node i's cluster link down (cut) or up (heal).
func (l *netLayout) setLink(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return l.do("ip", "link", "set", l.clusterLink(i), state)
}

// setPair cuts (up false) or heals the path between nodes i and j alone:
// each drops what it sends to the other (a blackhole route in its
// namespace), so both still reach every other member. Their direct
// streams fail while heartbeats still reach both through the others (the
// views need not lose either).
func (l *netLayout) setPair(i, j int, up bool) error {
	op := "add"
	if up {
		op = "del"
	}
	for _, p := range [][2]int{{i, j}, {j, i}} {
		if err := l.do("ip", "netns", "exec", l.ns(p[0]), "ip", "route", op, "blackhole", l.ip(1, 10+p[1])+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// exec is the prefix that runs a command in node i's namespace.
func (l *netLayout) exec(i int) []string { return []string{"ip", "netns", "exec", l.ns(i)} }

func (l *netLayout) do(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// run does args and remembers undo for close.
func (l *netLayout) run(args, undo []string) error {
	if err := l.do(args...); err != nil {
		return err
	}
	l.undo = append(l.undo, undo)
	return nil
}

// close removes the namespaces (their veths go with them) and bridges.
func (l *netLayout) close() {
	for i := len(l.undo) - 1; i >= 0; i-- {
		l.do(l.undo[i]...)
	}
	l.undo = nil
}
