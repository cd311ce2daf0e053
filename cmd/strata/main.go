// Command strata runs one large language model across many machines.
// Every machine runs this same binary; see README.md.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
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
	}
	root.AddCommand(inspectCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lets each command file register itself.
var extraCommands []func() *cobra.Command
