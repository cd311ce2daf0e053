package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"strata/api"
	"strata/internal/units"
)

func init() { extraCommands = append(extraCommands, statusCmd) }

func statusCmd() *cobra.Command {
	var (
		apiURL, apiKey string
		asJSON         bool
		expect         int
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [--api URL] [--json] [--expect N]",
		Short: "List the cluster members a node sees: peer ID, addresses, memory, models",
		Long: `status asks a running node (strata node) for its membership view.

--expect N waits (up to --timeout) until the node sees at least N members,
also waiting for the node's API to come up: for scripts that start a
cluster and go on once it has formed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if apiKey == "" {
				apiKey = os.Getenv("STRATA_API_KEY")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, body, err := fetchStatus(ctx, apiURL, apiKey, expect)
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "api", api.DefaultAddr, "the node's status API (host:port or URL)")
	f.StringVar(&apiKey, "api-key", "", "API key (default $STRATA_API_KEY)")
	f.BoolVar(&asJSON, "json", false, `print {"members": [{"peer_id", "addrs", "memory_bytes", "models", ...}]}`)
	f.IntVar(&expect, "expect", 0, "wait until the node sees at least this many members")
	f.DurationVar(&timeout, "timeout", 15*time.Second, "give up after this long")
	return cmd
}

// fetchStatus gets the view, retrying while expect is set and not met.
func fetchStatus(ctx context.Context, url, key string, expect int) (api.PeersStatus, []byte, error) {
	for {
		st, body, err := api.FetchPeers(ctx, url, key)
		if err == nil && len(st.Members) >= expect {
			return st, body, nil
		}
		if expect == 0 {
			return st, body, statusError(url, err)
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return st, body, statusError(url, err)
			}
			return st, body, fmt.Errorf("the node at %s sees %d members, not the %d expected", url, len(st.Members), expect)
		case <-time.After(100 * time.Millisecond): // polling a remote process: nothing to wait on
		}
	}
}

func statusError(url string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("no strata node answers at %s (%v); start one with strata node", url, op.Err)
	}
	return err
}

func printStatus(out io.Writer, st api.PeersStatus) {
	fmt.Fprintf(out, "%d members (view version %d, as seen by %s)\n", len(st.Members), st.ViewVersion, st.Self)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PEER ID\tMEMORY (FREE)\tMEMORY READS\tDEVICE\tMODELS\tSHARDS (MODEL:FIRST-END)\tADDRESSES")
	for _, m := range st.Members {
		id := m.PeerID
		if id == st.Self {
			id += " *"
		}
		var models []string
		for _, md := range m.Models {
			models = append(models, md.Name)
		}
		mem := "?"
		if m.MemoryBytes > 0 {
			mem = fmt.Sprintf("%s (%s)", units.Bytes(m.MemoryBytes), units.Bytes(m.MemoryAvailableBytes))
		}
		bw := "?"
		if m.MemoryBandwidth > 0 {
			bw = fmt.Sprintf("%.0f GB/s", m.MemoryBandwidth/1e9)
		}
		device := m.Device
		if device == "" {
			device = "CPU"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, mem, bw, device, orDash(strings.Join(models, ", ")), orDash(strings.Join(m.Shards, " ")), orDash(strings.Join(m.Addrs, " ")))
	}
	w.Flush()
	for _, m := range st.Members {
		for _, f := range m.Fetching {
			pct := 0.0
			if f.TotalBytes > 0 {
				pct = 100 * float64(f.DoneBytes) / float64(f.TotalBytes)
			}
			fmt.Fprintf(out, "%s is fetching layers of %s from peers: %s of %s (%.0f%%)\n", m.PeerID, f.Model, units.Bytes(f.DoneBytes), units.Bytes(f.TotalBytes), pct)
		}
	}
	for _, m := range st.Members {
		if len(m.Links) == 0 {
			continue
		}
		fmt.Fprintf(out, "links from %s (activations):\n", m.PeerID)
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  PEER ID\tTRANSPORT\tRTT")
		for _, l := range m.Links {
			fmt.Fprintf(w, "  %s\t%s\t%dµs\n", l.PeerID, l.Transport, l.RTTMicros)
		}
		w.Flush()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
