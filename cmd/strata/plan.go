package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"strata/actors"
	"strata/actors/plan"
	"strata/api"
	"strata/internal/units"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

func init() { extraCommands = append(extraCommands, planCmd) }

func planCmd() *cobra.Command {
	var (
		modelPath, shape, typeName, nodeList string
		apiURL, apiKey                       string
		opts                                 plan.Options
		asJSON                               bool
	)
	cmd := &cobra.Command{
		Use:   "plan (--model FILE | --shape NAME [--type T]) (--nodes \"a=512GB,b=256GB\" | --api URL)",
		Short: "Show where each layer of a model would run on a cluster, without loading weights",
		Long: `plan computes the placement strata would use: the fewest stages that fit,
layers in proportion to each node's memory (or compute, when given as
name=SIZE@RATE), never more than a node offers. It reads only the model's
tensor table (--model) or a known shape (--shape; see strata synth --help).
With --api, the nodes are the live cluster as that node sees it: the
members that hold the model (by its name) with the memory they offer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var m plan.Model
			switch {
			case modelPath != "" && shape != "":
				return fmt.Errorf("give --model or --shape, not both")
			case modelPath != "":
				f, err := gguf.Open(modelPath)
				if err != nil {
					return err
				}
				defer f.Close()
				p, err := model.ProfileOf(f)
				if err != nil {
					return err
				}
				m = plan.FromProfile(actors.ModelName(modelPath), p)
			case shape != "":
				s, err := model.LookupShape(shape)
				if err != nil {
					return err
				}
				t, err := tensor.ParseType(typeName)
				if err != nil {
					return err
				}
				m = plan.FromProfile(shape+"-"+typeName, s.Profile(t))
			default:
				return fmt.Errorf("--model FILE or --shape NAME is required")
			}
			var nodes []plan.Node
			var err error
			switch {
			case apiURL != "" && nodeList != "":
				return fmt.Errorf("give --nodes or --api, not both")
			case apiURL != "":
				nodes, err = liveNodes(cmd.Context(), apiURL, apiKey, m.Name, modelPath == "")
			default:
				nodes, err = parseNodes(nodeList)
			}
			if err != nil {
				return err
			}
			p, err := plan.Place(m, nodes, opts)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%sweights %s in all, KV %s per token\n", p, units.Bytes(m.WeightBytes()), units.Bytes(m.KVBytesPerToken))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", "", "GGUF model file (only its header is read)")
	f.StringVar(&shape, "shape", "", "a known model shape instead of a file")
	f.StringVar(&typeName, "type", "Q8_0", "weight type for --shape")
	f.StringVar(&nodeList, "nodes", "", `the cluster: "name=SIZE[@COMPUTE],..." e.g. "a=512GB,b=512GB,c=256GB"`)
	f.StringVar(&apiURL, "api", "", "plan on the live cluster seen by the node at this URL")
	f.StringVar(&apiKey, "api-key", os.Getenv("STRATA_API_KEY"), "API key of that node (default $STRATA_API_KEY)")
	f.IntVar(&opts.Context, "context", 4096, "KV cache positions to reserve per session")
	f.IntVar(&opts.Sessions, "sessions", 1, "concurrent sessions to reserve KV for")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// liveNodes are the members of a running cluster that hold the model
// (every member, for a shape nobody holds).
func liveNodes(ctx context.Context, url, key, model string, anyNode bool) ([]plan.Node, error) {
	st, _, err := api.FetchPeers(ctx, url, key)
	if err != nil {
		return nil, err
	}
	var nodes []plan.Node
	for _, m := range st.Members {
		has := anyNode
		for _, md := range m.Models {
			has = has || md.Name == model
		}
		if has {
			nodes = append(nodes, plan.Node{ID: m.PeerID, FreeBytes: m.MemoryBytes, Compute: m.ComputeFlops})
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no member of the cluster at %s has model %q (%d members)", url, model, len(st.Members))
	}
	return nodes, nil
}

// parseNodes reads "a=512GB,b=256GB@2.5" into plan nodes.
func parseNodes(s string) ([]plan.Node, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf(`--nodes is required, e.g. --nodes "a=512GB,b=256GB"`)
	}
	var nodes []plan.Node
	for _, item := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--nodes: %q is not name=SIZE", item)
		}
		n := plan.Node{ID: name}
		if sz, rate, ok := strings.Cut(size, "@"); ok {
			size = sz
			if _, err := fmt.Sscanf(rate, "%g", &n.Compute); err != nil || n.Compute <= 0 {
				return nil, fmt.Errorf("--nodes: compute rate %q of %s is not a positive number", rate, name)
			}
		}
		b, err := units.ParseBytes(size)
		if err != nil {
			return nil, fmt.Errorf("--nodes: %s: %w", name, err)
		}
		n.FreeBytes = b
		nodes = append(nodes, n)
	}
	return nodes, nil
}
