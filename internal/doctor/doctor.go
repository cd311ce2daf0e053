// Package doctor diagnoses a strata node and its cluster for the people
// who run them: each check says what it looked at and, when something is
// wrong, what to do about it, in words (strata doctor, GET /api/doctor).
//
// The checks are pure functions of facts gathered elsewhere: a node's own
// (memory, disk budget, open-file limit, the secret file: Local), which
// every node also announces to the others as findings, and the cluster
// view (versions, protocols, platforms, clocks, links: Cluster).
package doctor

import (
	"fmt"
	"strings"
)

// Status is a check's outcome.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // worth a look; the cluster works
	Fail Status = "fail" // something is wrong: strata doctor exits non-zero
)

// A Check is one thing looked at.
type Check struct {
	Name    string `json:"check"`          // memory, disk, open-files, secret, …
	Node    string `json:"node,omitempty"` // the member it is about (peer ID); "" for this machine or the whole cluster
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"` // what to do, when not OK
}

// Report is every check, and whether none failed.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// NewReport collects checks.
func NewReport(checks ...[]Check) Report {
	r := Report{OK: true, Checks: []Check{}}
	for _, cs := range checks {
		for _, c := range cs {
			r.Checks = append(r.Checks, c)
			if c.Status == Fail {
				r.OK = false
			}
		}
	}
	return r
}

// Finding is how a node announces a check that is not OK to the other
// members (NodeInfo.findings): "status|check|message|fix".
func Finding(c Check) string {
	return strings.Join([]string{string(c.Status), c.Name, clean(c.Message), clean(c.Fix)}, "|")
}

// ParseFinding reads an announced finding of member node; a malformed one
// is reported as it is.
func ParseFinding(node, s string) Check {
	f := strings.SplitN(s, "|", 4)
	if len(f) != 4 || Status(f[0]) != Warn && Status(f[0]) != Fail {
		return Check{Name: "finding", Node: node, Status: Warn, Message: fmt.Sprintf("unreadable finding %.200q", s)}
	}
	return Check{Name: f[1], Node: node, Status: Status(f[0]), Message: f[2], Fix: f[3]}
}

// Findings are the checks of cs that are not OK, as announced.
func Findings(cs []Check) []string {
	var out []string
	for _, c := range cs {
		if c.Status != OK {
			out = append(out, Finding(c))
		}
	}
	return out
}

func clean(s string) string { return strings.ReplaceAll(s, "|", "/") }

// Text writes the report for a terminal: one line per check, the fix
// indented under it.
func (r Report) Text() string {
	var b strings.Builder
	for _, c := range r.Checks {
		node := ""
		if c.Node != "" {
			node = " [" + short(c.Node) + "]"
		}
		fmt.Fprintf(&b, "%-4s  %-10s%s %s\n", c.Status, c.Name, node, c.Message)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(&b, "      fix: %s\n", c.Fix)
		}
	}
	fails, warns := 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	fmt.Fprintf(&b, "%d checks: %d failed, %d to look at\n", len(r.Checks), fails, warns)
	return b.String()
}

// short is the tail of a peer ID, as strata status prints it.
func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
