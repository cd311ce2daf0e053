package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strata/actors/plan"
	"strata/api"
	"strata/internal/units"
	"strata/runtime/catalog"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

func init() { extraCommands = append(extraCommands, planCmd) }

func planCmd() *cobra.Command {
	var (
		modelPath, shape, typeName, nodeList string
		kvType                               string
		apiURL, apiKey                       string
		opts                                 plan.Options
		asJSON, simulate                     bool
		links                                []string
		memBW, placement, experts            string
		cost                                 plan.CostOptions
	)
	cmd := &cobra.Command{
		Use:   "plan (--model FILE | --shape NAME [--type T]) (--nodes \"a=512GB,b=256GB\" | --api URL) [--simulate]",
		Short: "Show where each layer of a model would run on a cluster, without loading weights",
		Long: `plan computes the placement strata would use: the fewest stages that fit,
layers in proportion to each node's memory (or compute, when given as
name=SIZE@RATE), then boundaries moved so that each stage's work per token
(the bytes its layers read, and the last stage's output head) follows the
same proportion, never more than a node offers. It reads only the model's
tensor table (--model) or a known shape (--shape; see strata synth --help).
With --api, the nodes are the live cluster as that node sees it: the
members that hold the model (by its name) with the memory they offer and
the memory bandwidth and compute they measured and announce; links whose
round trip a member measured take half of it as their latency (the
smaller of the two ends'), the rest --link's.

It then predicts the decode speed (tokens/s of one answer) of every way
to run the model on those nodes (a pipeline of stages, tensor-parallel
groups, or tensor-parallel groups inside pipeline stages) from a cost
model: each node's memory bandwidth (name=SIZE:800GB/s, or --membw) and
the links between them (--link rdma, --link tcp, or --link 5us,9GB/s),
and says which it would choose and why. The plan printed first is the one
strata node --placement (pipeline by default; auto, tp, hybrid) would run:
--placement here picks the same.

--simulate projects the decode speed on the first 1, 2, ... N of the
nodes, for each --link given, as a table: for --model/--shape, or with
neither for Qwen3-235B-A22B and Kimi K2 (at --type, Q4_K by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var m plan.Model
			var err error
			if opts.KVType, err = model.ParseKVType(kvType); err != nil {
				return fmt.Errorf("--kv-type: %w", err)
			}
			if cost.Experts, err = plan.ParseExpertMode(experts); err != nil {
				return fmt.Errorf("--experts: %w", err)
			}
			if simulate && modelPath == "" && shape == "" {
				if !cmd.Flags().Changed("type") {
					typeName = "Q4_K"
				}
				if len(links) == 0 {
					links = []string{"tcp"}
				}
				nodes, err := parseNodes(nodeList)
				if err != nil {
					return err
				}
				net, err := networks(links)
				if err != nil {
					return err
				}
				if err := defaultBandwidth(nodes, memBW); err != nil {
					return err
				}
				t, err := tensor.ParseType(typeName)
				if err != nil {
					return err
				}
				var ms []plan.Model
				for _, name := range []string{"qwen3-235b-a22b", "kimi-k2"} {
					ms = append(ms, shapeModel(name+" "+t.String(), model.Shapes[name], t))
				}
				return simulateModels(cmd, ms, nodes, links, net, opts, cost)
			}
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
				m = plan.FromProfile(catalog.Name(modelPath), p)
				if cfg, err := model.ConfigOf(f.Metadata()); err == nil && cfg.Experts > 0 {
					// The expert FFN's units, as the nodes' loaders cut
					// them; a model they cannot split keeps 0 (unknown).
					if u, err := model.TPUnitsOf(f, cfg, 0, cfg.Layers); err == nil {
						m.ExpertFFNUnits = cfg.ExpertFFN / u.FFN
					}
				}
			case shape != "":
				s, err := model.LookupShape(shape)
				if err != nil {
					return err
				}
				t, err := tensor.ParseType(typeName)
				if err != nil {
					return err
				}
				m = shapeModel(shape+"-"+t.String(), s, t) // ggml's name for the type, whatever its case in --type
			default:
				return fmt.Errorf("--model FILE or --shape NAME is required")
			}
			var nodes []plan.Node
			var measured map[[2]string]plan.Link
			switch {
			case apiURL != "" && nodeList != "":
				return fmt.Errorf("give --nodes or --api, not both")
			case apiURL != "":
				nodes, measured, err = liveNodes(cmd.Context(), apiURL, apiKey, m.Name, modelPath == "")
			default:
				nodes, err = parseNodes(nodeList)
			}
			if err != nil {
				return err
			}
			if len(links) == 0 {
				links = []string{"tcp"}
			}
			net, err := networks(links)
			if err != nil {
				return err
			}
			for i := range net {
				// Measured round trips override --link for their pairs;
				// throughput is not measured, so --link's is kept.
				if len(measured) > 0 {
					net[i].Pairs = map[[2]string]plan.Link{}
					for k, l := range measured {
						net[i].Pairs[k] = plan.Link{Latency: l.Latency, Throughput: net[i].Default.Throughput}
					}
				}
			}
			if err := defaultBandwidth(nodes, memBW); err != nil {
				return err
			}
			if simulate {
				return simulateModels(cmd, []plan.Model{m}, nodes, links, net, opts, cost)
			}
			mode, err := plan.ParseMode(placement)
			if err != nil {
				return fmt.Errorf("--placement: %w", err)
			}
			p, err := plan.PlaceMode(m, nodes, net[0], opts, cost, mode)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%sweights %s in all, KV %s per token\n", p, units.Bytes(m.WeightBytes()), units.Bytes(m.KVPerToken(opts)))
			cands, err := plan.Candidates(m, nodes, net[0], opts, cost)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\npredicted decode speed (cost model; links %s = %s):\n%s", links[0], net[0].Default, plan.Table(cands))
			if best, ok := plan.Best(cands); ok {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", plan.Explain(best, cands))
				if mode == plan.Pipeline && best.Kind() != "single node" && best.Kind() != "pipeline" {
					fmt.Fprintln(cmd.OutOrStdout(), "(strata node --placement auto runs it; the plan above is --placement pipeline's)")
				}
			}
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
	f.IntVar(&opts.Context, "context", model.DefaultContext, "KV cache positions to reserve per session")
	f.IntVar(&opts.Sessions, "sessions", 1, "concurrent sessions to reserve KV for")
	f.StringVar(&kvType, "kv-type", "f16", "KV cache type the nodes run (their --kv-type): "+model.KVTypes)
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&simulate, "simulate", false, "project decode tokens/s on 1..N of the nodes for each --link (see above)")
	f.StringArrayVar(&links, "link", nil, "links between nodes: rdma, tcp, or LATENCY,THROUGHPUT such as 5us,9GB/s (repeatable with --simulate; default tcp)")
	f.StringVar(&memBW, "membw", "100GB/s", "memory bandwidth of nodes that do not give one (name=SIZE:800GB/s)")
	f.IntVar(&cost.ActBytes, "act-bytes", 4, "bytes per activation on the wire (4: f32, 2: f16)")
	f.IntVar(&cost.Position, "at-position", 0, "context position of the decoded token (its KV cache reads)")
	f.StringVar(&placement, "placement", "pipeline", "the plan to show first, as strata node --placement: pipeline, auto, tp or hybrid")
	f.StringVar(&experts, "experts", "auto", "how tensor-parallel groups hold a mixture-of-experts model's routed experts, as strata node --experts: auto (the cost model's choice), split (each expert split by columns) or whole (whole experts per member)")
	return cmd
}

// shapeModel is a known shape in weight type t as the planner sees it,
// with the units its experts' columns split into as that file would have.
func shapeModel(name string, s model.Shape, t tensor.Type) plan.Model {
	m := plan.FromProfile(name, s.Profile(t))
	m.ExpertFFNUnits = s.ExpertFFNUnits(t)
	return m
}

// liveNodes are the members of a running cluster that hold the model
// (every member, for a shape nobody holds), with what they announce
// (memory, compute, memory bandwidth), and the links they measured
// between them (round trips; plan.Inputs).
func liveNodes(ctx context.Context, url, key, model string, anyNode bool) ([]plan.Node, map[[2]string]plan.Link, error) {
	st, _, err := api.FetchPeers(ctx, url, key)
	if err != nil {
		return nil, nil, err
	}
	var members []plan.Announced
	for _, m := range st.Members {
		has := anyNode
		for _, md := range m.Models {
			has = has || md.Name == model
		}
		if has {
			a := plan.Announced{ID: m.PeerID, MemoryBytes: m.MemoryBytes, Compute: m.ComputeFlops, MemBandwidth: m.MemoryBandwidth}
			for _, l := range m.Links {
				a.Links = append(a.Links, plan.AnnouncedLink{Peer: l.PeerID, RTT: time.Duration(l.RTTMicros) * time.Microsecond})
			}
			members = append(members, a)
		}
	}
	if len(members) == 0 {
		return nil, nil, fmt.Errorf("no member of the cluster at %s has model %q (%d members)", url, model, len(st.Members))
	}
	nodes, net := plan.Inputs(members, plan.Link{})
	return nodes, net.Pairs, nil
}

// parseNodes reads "a=512GB,b=256GB@2.5,c=192GB:800GB/s" into plan nodes
// (memory, then optionally @relative compute, :memory bandwidth).
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
		if sz, bw, ok := strings.Cut(size, ":"); ok {
			size = sz
			r, err := plan.ParseRate(bw)
			if err != nil {
				return nil, fmt.Errorf("--nodes: memory bandwidth of %s: %w", name, err)
			}
			n.MemBandwidth = r
		}
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

// short is a peer ID's last 6 characters (its first are all alike).
func short(id string) string { return id[max(0, len(id)-6):] }

// networks parses one network per --link.
func networks(links []string) ([]plan.Network, error) {
	var nets []plan.Network
	for _, l := range links {
		ln, err := plan.ParseLink(l)
		if err != nil {
			return nil, fmt.Errorf("--link: %w", err)
		}
		nets = append(nets, plan.Network{Default: ln})
	}
	return nets, nil
}

// defaultBandwidth gives nodes that announce no memory bandwidth --membw's.
func defaultBandwidth(nodes []plan.Node, memBW string) error {
	bw, err := plan.ParseRate(memBW)
	if err != nil {
		return fmt.Errorf("--membw: %w", err)
	}
	for i := range nodes {
		if nodes[i].MemBandwidth == 0 {
			nodes[i].MemBandwidth = bw
		}
	}
	return nil
}

// simulateModels prints, for each model and link, the predicted decode
// speed on the first 1..N nodes: the best plan overall, the best with
// whole layers per node (one node or a pipeline), and the best with
// tensor parallelism.
func simulateModels(cmd *cobra.Command, ms []plan.Model, nodes []plan.Node, links []string, nets []plan.Network, opts plan.Options, cost plan.CostOptions) error {
	w := cmd.OutOrStdout()
	var ids []string
	for _, n := range nodes {
		ids = append(ids, fmt.Sprintf("%s %s at %s", n.ID, units.Bytes(n.FreeBytes), plan.FormatRate(n.MemBandwidth)))
	}
	act := cost.ActBytes
	if act <= 0 {
		act = 4
	}
	fmt.Fprintf(w, "Predicted decode speed of one answer (strata's cost model, not a measurement).\nNodes: %s. Activations %d bytes each on the wire; KV cache read at position %d.\n\n",
		strings.Join(ids, ", "), act, cost.Position)
	fmt.Fprintf(w, "| model | link | nodes | best plan | tok/s | vs 1 node | layers only (pipeline) | tensor-parallel |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		for li, net := range nets {
			var one float64
			for n := 1; n <= len(nodes); n++ {
				cands, err := plan.Candidates(m, nodes[:n], net, opts, cost)
				if err != nil {
					return err
				}
				best, ok := plan.Best(cands)
				var pipe, tp plan.Candidate
				for _, c := range cands {
					if c.Refusal != "" || c.Nodes() != n && c.Kind() != "single node" {
						continue
					}
					if k := c.Kind(); k == "single node" || k == "pipeline" {
						if c.TokensPerSecond > pipe.TokensPerSecond {
							pipe = c
						}
					} else if c.TokensPerSecond > tp.TokensPerSecond {
						tp = c
					}
				}
				cell := func(c plan.Candidate) string {
					if c.Stages == nil {
						return "-"
					}
					return fmt.Sprintf("%.1f (%s)", c.TokensPerSecond, c.Name())
				}
				if !ok {
					fmt.Fprintf(w, "| %s | %s | %d | does not fit | - | - | - | - |\n", m.Name, links[li], n)
					continue
				}
				if n == 1 {
					one = best.TokensPerSecond
				}
				vs := "-"
				if one > 0 {
					vs = fmt.Sprintf("%.2fx", best.TokensPerSecond/one)
				}
				fmt.Fprintf(w, "| %s | %s | %d | %s | %.1f | %s | %s | %s |\n", m.Name, links[li], n, best.Name(), best.TokensPerSecond, vs, cell(pipe), cell(tp))
			}
		}
	}
	fmt.Fprintf(w, "\nLinks: ")
	for i, l := range links {
		if i > 0 {
			fmt.Fprintf(w, "; ")
		}
		fmt.Fprintf(w, "%s = %s", l, nets[i].Default)
	}
	if len(nets) > 0 && len(nets[0].Pairs) > 0 {
		var ms []string
		for k, l := range nets[0].Pairs {
			ms = append(ms, fmt.Sprintf("%s-%s %v", short(k[0]), short(k[1]), l.Latency))
		}
		sort.Strings(ms)
		fmt.Fprintf(w, "; measured by the nodes (half the round trip, one way), instead of --link's latency: %s", strings.Join(ms, ", "))
	}
	fmt.Fprintln(w, ". strata node runs pipeline plans unless --placement auto, tp or hybrid.")
	// How the tensor-parallel groups hold the experts: the cost model's
	// choice (or --experts), one line per model and group size.
	for _, m := range ms {
		seen := map[string]bool{}
		for n := 2; n <= len(nodes); n++ {
			cands, err := plan.Candidates(m, nodes[:n], nets[0], opts, cost)
			if err != nil {
				return err
			}
			for _, c := range cands {
				g := c.Stages[0]
				if c.Refusal != "" || !g.MoE || len(c.Stages) != 1 {
					continue
				}
				line := fmt.Sprintf("%s, TP %d-way: %s (the busiest member reads %.2f experts' bytes per token and layer with each expert split by columns, %.2f with whole experts)",
					m.Name, len(g.Members), expertLayoutName(g.ExpertParallel), g.ExpertReads[0], g.ExpertReads[1])
				if !seen[line] {
					seen[line] = true
					fmt.Fprintln(w, line)
				}
			}
		}
	}
	return nil
}

// expertLayoutName says how a group holds its routed experts.
func expertLayoutName(whole bool) string {
	if whole {
		return "experts whole per member"
	}
	return "each expert split by columns"
}
