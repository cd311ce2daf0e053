package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPrecedence: a flag beats the environment, which beats the
// config file, which beats the default; each setting says where it came
// from.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, configFileName), []byte(`# a node
[node]
memory = "5GB"   # overridden by the flag
parallel = 2     # overridden by the environment
context = 2_048
no-mdns = true
secret-file = '/etc/strata/secret'
join = ["/ip4/10.0.0.2/tcp/7341/p2p/A#1", "/ip4/10.0.0.3/tcp/7341/p2p/B"]
`), 0o600)
	env := map[string]string{"STRATA_PARALLEL": "3", "STRATA_SECRET": "not for the generic layer", "STRATA_LISTEN": "/ip4/0.0.0.0/tcp/1,/ip4/0.0.0.0/tcp/2"}
	cmd := nodeCmd()
	fs := cmd.Flags()
	if err := fs.Parse([]string{"--memory", "2GB"}); err != nil {
		t.Fatal(err)
	}
	settings, err := applyConfig(fs, dir, "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]setting{}
	for _, s := range settings {
		got[s.Flag] = s
	}
	file := filepath.Join(dir, configFileName)
	for flag, want := range map[string]setting{
		"memory":      {Value: "2GB", Source: "flag"},
		"parallel":    {Value: "3", Source: "env STRATA_PARALLEL"},
		"context":     {Value: "2048", Source: file + ":5"},
		"no-mdns":     {Value: "true", Source: file + ":6"},
		"secret-file": {Value: "/etc/strata/secret", Source: file + ":7"},
		"join":        {Value: "[/ip4/10.0.0.2/tcp/7341/p2p/A#1,/ip4/10.0.0.3/tcp/7341/p2p/B]", Source: file + ":8"},
		"listen":      {Value: "[/ip4/0.0.0.0/tcp/1,/ip4/0.0.0.0/tcp/2]", Source: "env STRATA_LISTEN"},
		"secret":      {Value: "", Source: "default"},
		"threads":     {Value: "0", Source: "default"},
	} {
		if s := got[flag]; s.Value != want.Value || s.Source != want.Source {
			t.Errorf("%s: %+v, want %+v", flag, s, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ file, want string }{
		{"bogus = 1\n", `:1: unknown setting "bogus"`},
		{"data-dir = '/x'\n", `unknown setting "data-dir"`},
		{"\nparallel = \"x\"\n", `:2: parallel: invalid argument "x"`},
		{"memory = 5GB\n", "not a TOML string"},
		{"memory\n", "want name = value"},
		{"parallel = 1\nparallel = 2\n", "set twice"},
		{"join = [\"a\",\n", "close on the same line"},
	} {
		path := filepath.Join(dir, "c.toml")
		os.WriteFile(path, []byte(tc.file), 0o600)
		fs := nodeCmd().Flags()
		if _, err := applyConfig(fs, dir, path, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
	if _, err := applyConfig(nodeCmd().Flags(), dir, filepath.Join(dir, "missing.toml"), func(string) string { return "" }); err == nil {
		t.Error("a --config file that does not exist was accepted")
	}
	if _, err := applyConfig(nodeCmd().Flags(), t.TempDir(), "", func(string) string { return "" }); err != nil {
		t.Errorf("no config file in the data dir: %v", err)
	}
}

// TestNodeReadsConfigFile: strata node takes its settings from
// DATA_DIR/config.toml (here a bad --memory, refused before anything
// starts).
func TestNodeReadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, configFileName), []byte("memory = \"lots\"\n"), 0o600)
	if _, err := run(t, "node", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "--memory") {
		t.Errorf("node with memory = \"lots\" in its config file: %v", err)
	}
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	log, err := newLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown","k":1`) {
		t.Errorf("json at warn: %q", s)
	}
	if _, err := newLogger(&b, "xml", "info"); err == nil {
		t.Error("--log-format xml accepted")
	}
	if _, err := newLogger(&b, "text", "loud"); err == nil {
		t.Error("--log-level loud accepted")
	}
}
