// Command strata runs one large language model across many machines.
// Every machine runs this same binary; see README.md.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"strata/cmd/strata/bench"
	"strata/runtime/tensor"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

// newRoot builds the command tree (tests run commands through it).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Run one large language model on many machines at once",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// STRATA_KERNELS names the kernel set to run instead of the
		// best one this CPU has (avx512, avxvnni, avx2, neon, i8mm,
		// generic), as on a CPU with only that set: for comparing them
		// on one machine. `strata bench` reports the set in use.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if k := os.Getenv("STRATA_KERNELS"); k != "" {
				return tensor.SetKernels(k)
			}
			return nil
		},
	}
	root.AddCommand(inspectCmd(), bench.Command())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lets each command file register itself.
var extraCommands []func() *cobra.Command
