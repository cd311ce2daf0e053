package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() { extraCommands = append(extraCommands, configCmd) }

// The node's settings come from, in this order of precedence: its
// command line, STRATA_* environment variables (STRATA_ and the flag's
// name in capitals with - as _: --max-tokens is STRATA_MAX_TOKENS), the
// config file (--config, default DATA_DIR/config.toml: one "name = value"
// per flag, TOML), and the defaults. --data-dir comes from the command
// line or STRATA_DATA_DIR only (the file is in it).
const configFileName = "config.toml"

// notFromConfig are flags the config layers leave alone: where the file
// is, and the secrets, whose environment variables node reads itself
// (with the same names) so that it can tell where the secret came from.
var notFromConfig = map[string]bool{"config": true, "data-dir": true, "help": true}
var notFromEnv = map[string]bool{"secret": true, "api-key": true}

// A setting is one node flag's effective value and where it came from.
type setting struct {
	Flag   string `json:"flag"`
	Value  string `json:"value"`
	Source string `json:"source"` // "flag", "env STRATA_X", "FILE:LINE" or "default"
}

// envName is a flag's environment variable.
func envName(flag string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyConfig fills the flags of fs not given on the command line from
// the environment, then from the config file, and returns every flag's
// setting. configPath "" means DATA_DIR/config.toml if it exists.
func applyConfig(fs *pflag.FlagSet, dataDir, configPath string, getenv func(string) string) ([]setting, error) {
	path, must := configPath, configPath != ""
	if path == "" {
		path = filepath.Join(dataDir, configFileName)
	}
	file, err := readConfigFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !must:
		file = nil
	case err != nil:
		return nil, fmt.Errorf("--config: %w", err)
	}
	for name, v := range file {
		if f := fs.Lookup(name); f == nil || notFromConfig[name] {
			return nil, fmt.Errorf("%s:%d: unknown setting %q (the settings are strata node's flags; --data-dir comes from the command line or STRATA_DATA_DIR)", path, v.line, name)
		}
	}
	var out []setting
	var firstErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if notFromConfig[f.Name] || firstErr != nil {
			return
		}
		s := setting{Flag: f.Name, Source: "default"}
		switch {
		case f.Changed:
			s.Source = "flag"
		case !notFromEnv[f.Name] && getenv(envName(f.Name)) != "":
			s.Source = "env " + envName(f.Name)
			for _, v := range splitList(f, getenv(envName(f.Name))) {
				if err := fs.Set(f.Name, v); err != nil {
					firstErr = fmt.Errorf("%s: %w", envName(f.Name), err)
				}
			}
		case file[f.Name].line > 0:
			v := file[f.Name]
			s.Source = fmt.Sprintf("%s:%d", path, v.line)
			for _, x := range v.values {
				if err := fs.Set(f.Name, x); err != nil {
					firstErr = fmt.Errorf("%s:%d: %s: %w", path, v.line, f.Name, err)
				}
			}
		}
		s.Value = f.Value.String()
		if (f.Name == "secret" || f.Name == "api-key") && s.Value != "" {
			s.Value = "(set)"
		}
		out = append(out, s)
	})
	return out, firstErr
}

// splitList splits an environment value for a repeatable flag on commas.
func splitList(f *pflag.Flag, v string) []string {
	if t := f.Value.Type(); t == "stringArray" || t == "stringSlice" {
		return strings.Split(v, ",")
	}
	return []string{v}
}

// configValue is one setting of the file: its values (one, or a list's)
// and its line.
type configValue struct {
	values []string
	line   int
}

// readConfigFile reads the TOML the config file is: comments, an optional
// [node] table, and name = value lines with strings ("…" or '…'),
// integers, floats, booleans and arrays of those on one line.
func readConfigFile(path string) (map[string]configValue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]configValue{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(stripComment(sc.Text()))
		if line == "" || line == "[node]" {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'[]") {
			return nil, fmt.Errorf("%s:%d: want name = value, got %q", path, n, line)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s is set twice", path, n, key)
		}
		vals, err := tomlValues(val)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", path, n, key, err)
		}
		out[key] = configValue{values: vals, line: n}
	}
	return out, sc.Err()
}

// stripComment drops a # comment that is not inside a string.
func stripComment(s string) string {
	if at := outsideStrings(s, '#'); len(at) > 0 {
		return s[:at[0]]
	}
	return s
}

// outsideStrings returns the offsets of c in s that are not inside a
// "…" or '…' string.
func outsideStrings(s string, c rune) []int {
	var at []int
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == c:
			at = append(at, i)
		}
	}
	return at
}

func tomlValues(v string) ([]string, error) {
	if strings.HasPrefix(v, "[") {
		if !strings.HasSuffix(v, "]") {
			return nil, errors.New("an array must close on the same line")
		}
		var out []string
		for _, item := range splitTopLevel(strings.TrimSpace(v[1 : len(v)-1])) {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			x, err := tomlScalar(item)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	x, err := tomlScalar(v)
	return []string{x}, err
}

// splitTopLevel splits an array's items on commas outside strings.
func splitTopLevel(s string) []string {
	var out []string
	start := 0
	for _, i := range outsideStrings(s, ',') {
		out = append(out, s[start:i])
		start = i + 1
	}
	return append(out, s[start:])
}

func tomlScalar(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", fmt.Errorf("bad string %s", v)
		}
		return s, nil
	case strings.HasPrefix(v, "'"):
		if len(v) < 2 || !strings.HasSuffix(v, "'") || strings.Contains(v[1:len(v)-1], "'") {
			return "", fmt.Errorf("bad string %s", v)
		}
		return v[1 : len(v)-1], nil
	case v == "true" || v == "false":
		return v, nil
	}
	if _, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64); err == nil {
		return strings.ReplaceAll(v, "_", ""), nil
	}
	return "", fmt.Errorf("%s is not a TOML string, number or boolean (quote text: \"%s\")", v, v)
}

func configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show strata node's effective settings and where each comes from",
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [--json] [node flags]",
		Short: "Print every strata node setting: its value and whether it came from a flag, the environment, the config file or the default",
		Long: `show resolves strata node's settings as a node started with the same
flags would: a flag given here wins, then STRATA_* environment variables
(STRATA_MEMORY for --memory, STRATA_MAX_TOKENS for --max-tokens; a
repeatable flag takes a comma-separated list), then the config file
(--config, default DATA_DIR/config.toml), then the default. The file is
TOML, one setting per flag:

  # DATA_DIR/config.toml
  memory = "96GB"
  parallel = 8
  join = ["/ip4/10.0.0.2/tcp/7341/p2p/12D3KooW..."]

The secret and the API key are shown as (set), never printed.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			node := nodeCmd()
			node.SetArgs(nil)
			fs := node.Flags()
			fs.AddFlagSet(node.PersistentFlags())
			fs.BoolVar(&asJSON, "json", false, "print JSON")
			help := fs.BoolP("help", "h", false, "help for show")
			if err := fs.Parse(args); err != nil {
				return err
			}
			if *help {
				return cmd.Help()
			}
			dataDir, _ := fs.GetString("data-dir")
			configPath, _ := fs.GetString("config")
			settings, err := applyConfig(fs, dataDir, configPath, os.Getenv)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				var shown []setting
				for _, s := range settings {
					if s.Flag != "json" {
						shown = append(shown, s)
					}
				}
				return json.NewEncoder(out).Encode(shown)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
			fmt.Fprintf(tw, "data-dir\t%s\t%s\n", dataDir, dataDirSource(fs))
			for _, s := range settings {
				if f := fs.Lookup(s.Flag); s.Flag != "json" && !f.Hidden {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Flag, s.Value, s.Source)
				}
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(show)
	return cmd
}

func dataDirSource(fs *pflag.FlagSet) string {
	switch {
	case fs.Lookup("data-dir").Changed:
		return "flag"
	case os.Getenv("STRATA_DATA_DIR") != "":
		return "env STRATA_DATA_DIR"
	}
	return "default"
}
