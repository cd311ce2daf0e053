package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"strata/internal/units"
	"strata/runtime/catalog"
)

func init() { extraCommands = append(extraCommands, modelsCmd, rmCmd) }

// defaultStores are the other tools' stores a node reads models from.
const defaultStores = "huggingface,lmstudio,ollama"

// storeFlags are the flags that say where models are: shared by node,
// models, rm and pull.
type storeFlags struct {
	dataDir, models, stores string
}

func (s *storeFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	if cmd.Flags().Lookup("data-dir") == nil && cmd.PersistentFlags().Lookup("data-dir") == nil {
		f.StringVar(&s.dataDir, "data-dir", defaultDataDir(), "the node's data directory (its models are in DATA_DIR/models)")
	}
	f.StringVar(&s.models, "models", "", "directory of GGUF models (default DATA_DIR/models)")
	f.StringVar(&s.stores, "stores", defaultStores, `other stores to read models from: huggingface (the HF cache: $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub), lmstudio (~/.lmstudio/models), ollama ($OLLAMA_MODELS or ~/.ollama/models); "none" for only --models`)
}

// catalog returns the catalogue the flags describe.
func (s *storeFlags) catalog() (catalog.Catalog, error) {
	dir := s.models
	if dir == "" {
		dir = filepath.Join(s.dataDir, "models")
	}
	all := catalog.FromEnv([]string{dir})
	c := catalog.Catalog{Dirs: all.Dirs}
	for _, st := range strings.Split(s.stores, ",") {
		switch strings.TrimSpace(st) {
		case "huggingface", "hf":
			c.HFCache = all.HFCache
		case "lmstudio":
			c.LMStudio = all.LMStudio
		case "ollama":
			c.Ollama = all.Ollama
		case "none", "":
		default:
			return c, fmt.Errorf("--stores: unknown store %q (known: %s, none)", st, defaultStores)
		}
	}
	// The layers a node fetched from peers, when it has any.
	if s.dataDir != "" {
		if _, err := os.Stat(filepath.Join(s.dataDir, weightsDir)); err == nil {
			st, err := catalog.OpenStore(filepath.Join(s.dataDir, weightsDir), 0)
			if err != nil {
				return c, err
			}
			c.Partial = st
		}
	}
	return c, nil
}

// weightsDir is where, under DATA_DIR, a node keeps the layers it fetched
// from peers of models it does not hold complete (catalog.Store).
const weightsDir = "weights"

// modelRow is one line of strata models (and one object of --json).
type modelRow struct {
	Name         string   `json:"name"`
	SizeBytes    int64    `json:"size_bytes"`
	Architecture string   `json:"architecture,omitempty"`
	Quantization string   `json:"quantization,omitempty"`
	Layers       int      `json:"layers,omitempty"`
	Params       uint64   `json:"params,omitempty"`
	Source       string   `json:"source"`
	Where        string   `json:"where"`
	Paths        []string `json:"paths"`
	Complete     bool     `json:"complete"`
	// Held says what an incomplete model has: "2 of 5 parts", or for one
	// fetched in part from peers "layers 0-11 +embedding".
	Held     string    `json:"held,omitempty"`
	Shadowed bool      `json:"shadowed,omitempty"`
	Error    string    `json:"error,omitempty"`
	Modified time.Time `json:"modified"`
}

func modelsCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "models [--json]",
		Short: "List the models on this machine: --models, the Hugging Face cache, LM Studio and Ollama",
		Long: `models lists every GGUF model this machine has, under the name the cluster
uses for it: the file name without .gguf (a split model, NAME-00001-of-0000N.gguf
and its parts, is one model NAME), or MODEL:TAG for Ollama's. When two stores
have one name, the first wins (--models, Hugging Face, LM Studio, Ollama) and the
others are marked shadowed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := sf.catalog()
			if err != nil {
				return err
			}
			ms, err := c.List()
			if err != nil {
				return err
			}
			rows := make([]modelRow, 0, len(ms))
			for _, m := range ms {
				rows = append(rows, describeModel(m))
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Models []modelRow `json:"models"`
				}{rows})
			}
			printModels(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"models": [{"name", "size_bytes", "architecture", "quantization", "source", "where", "complete", ...}]}`)
	return cmd
}

func describeModel(m catalog.Model) modelRow {
	r := modelRow{Name: m.Name, SizeBytes: m.Size, Source: m.Source, Where: m.Where, Paths: m.Paths,
		Complete: m.Complete, Shadowed: m.Shadowed, Modified: m.ModTime}
	if m.Holding != nil {
		r.Held, r.Layers = m.Holding.String(), m.Holding.Layers
		if info, err := catalog.Describe(m); err == nil { // the header is held
			r.Architecture, r.Quantization, r.Layers, r.Params = info.Architecture, info.Quantization, info.Layers, info.Params
		}
		return r
	}
	if !m.Complete {
		r.Held = fmt.Sprintf("%d of %d parts", len(m.Paths), m.Parts)
		return r
	}
	info, err := catalog.Describe(m)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Architecture, r.Quantization, r.Layers, r.Params = info.Architecture, info.Quantization, info.Layers, info.Params
	return r
}

func printModels(w io.Writer, rows []modelRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no models (strata pull REPO[:QUANT] downloads one)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSIZE\tARCH\tQUANT\tLAYERS\tHELD\tSOURCE\tWHERE")
	for _, r := range rows {
		held := "complete"
		if !r.Complete {
			held = r.Held
		}
		if r.Shadowed {
			held += " (shadowed)"
		}
		arch := r.Architecture
		if r.Error != "" {
			arch = "unreadable: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, units.Bytes(uint64(r.SizeBytes)), arch, r.Quantization, r.Layers, held, r.Source, r.Where)
	}
	tw.Flush()
}

func rmCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Delete models from --models or the Hugging Face cache (Ollama's and LM Studio's are theirs)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := sf.catalog()
			if err != nil {
				return err
			}
			for _, name := range args {
				m, err := c.Remove(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s, %s in %s)\n", name, units.Bytes(uint64(m.Size)), m.Source, m.Where)
			}
			return nil
		},
	}
	sf.add(cmd)
	return cmd
}
