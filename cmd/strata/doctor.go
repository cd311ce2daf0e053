package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"strata/api"
	"strata/internal/doctor"
	"strata/peers"
)

func init() { extraCommands = append(extraCommands, doctorCmd) }

func doctorCmd() *cobra.Command {
	var apiURL, apiKey, dataDir string
	var asJSON, noProbe bool
	cmd := &cobra.Command{
		Use:   "doctor [--api URL] [--json]",
		Short: "Check this node and, through it, every member of the cluster, and say what to fix",
		Long: `doctor asks the node at --api for its checks (GET /api/doctor): its own
machine (memory offered against memory free, the disk budget for layers
fetched from peers, the open-file limit, the cluster secret's file mode,
on macOS the GPU wired-memory limit) and the cluster as the node sees it:
every member's version and protocol (and nodes refused for an
incompatible protocol), systems that differ, clocks that disagree by more
than a second, and every pair of members' link: missing (not a full
mesh), TCP between two nodes on one host (shared memory is the fast
path) or between two nodes with RDMA devices (RDMA is off: the fix says
how to turn it on), or slower than its transport should be (round trips
as the members measure them; the node at --api also sends 4 MB to every
member over the libp2p stream and reports the rate, --no-probe skips
it). Every member
also reports its own machine's findings, which appear under its ID.

When no node answers at --api, doctor checks this machine's data
directory alone and says so. It exits with status 1 when a check
failed; "warn" lines are worth a look but do not fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if apiKey == "" {
				apiKey = os.Getenv("STRATA_API_KEY")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), api.ProbeBudget+15*time.Second)
			defer cancel()
			rep, err := api.FetchDoctor(ctx, apiURL, apiKey, !noProbe)
			if err != nil {
				rep = doctor.NewReport(localOnly(dataDir), []doctor.Check{{Name: "node", Status: doctor.Fail,
					Message: fmt.Sprintf("no node answers at %s (%v): only this machine was checked", apiURL, err),
					Fix:     "start one (strata node, or strata service install), or point --api at a running node"}})
			}
			rep.Checks = append(rep.Checks, doctor.VulkanCheck(vulkanFacts()))
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.Encode(rep)
			} else {
				fmt.Fprint(out, rep.Text())
			}
			if !rep.OK {
				return errDoctorFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "api", api.DefaultAddr, "the node's API (host:port or URL)")
	f.StringVar(&apiKey, "api-key", "", "API key (default $STRATA_API_KEY)")
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "the node's data directory, checked when no node answers")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&noProbe, "no-probe", false, "do not time the node's links (4 MB sent to every member)")
	return cmd
}

// errDoctorFailed makes strata doctor exit 1 after printing its report.
var errDoctorFailed = fmt.Errorf("some checks failed (see above)")

// localOnly is what doctor can check of this machine without a node: the
// open-file limit, the secret's file mode, and the store of fetched
// layers' disk (its budget is the node's to say).
func localOnly(dataDir string) []doctor.Check {
	l := doctor.Local{OpenFiles: doctor.OpenFileLimit(), GPUWiredLimitMB: doctor.GPUWiredLimitMB()}
	if secret := filepath.Join(dataDir, peers.SecretFile); fileExists(secret) {
		l.SecretFile = secret
		l.SecretLoose, _ = peers.LooseFileMode(secret)
	}
	cs := doctor.LocalChecks(l)
	// The memory line without a node says nothing useful: leave it out.
	out := cs[:0]
	for _, c := range cs {
		if c.Name != "memory" {
			out = append(out, c)
		}
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
