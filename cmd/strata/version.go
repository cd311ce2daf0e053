package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"strata/peers"
	"strata/runtime/tensor"
)

func init() { extraCommands = append(extraCommands, versionCmd) }

// versionInfo is what strata version prints.
type versionInfo struct {
	Version     string `json:"version"`
	Protocol    uint32 `json:"protocol"`
	ProtocolMin uint32 `json:"protocol_min"`
	Go          string `json:"go"`
	Platform    string `json:"platform"`
	Kernels     string `json:"kernels"`
}

func currentVersion() versionInfo {
	return versionInfo{Version: version, Protocol: peers.Protocol, ProtocolMin: peers.MinProtocol,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Kernels: tensor.Kernels()}
}

func versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print strata's version, the cluster protocol versions it speaks, and its platform",
		Long: `version prints the build's version (stamped by make build and make
release; "dev" for a plain go build), the range of cluster protocol
versions it speaks (members must overlap: a node of a newer build that
still speaks the old protocol can join an older cluster, so a cluster can
be upgraded one node at a time), the Go release, the platform and the
kernel set the CPU runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(v)
			}
			proto := peers.ProtocolRange{Min: v.ProtocolMin, Max: v.Protocol}
			fmt.Fprintf(cmd.OutOrStdout(), "strata %s (protocol %s, %s, %s, kernels %s)\n", v.Version, proto, v.Go, v.Platform, v.Kernels)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
