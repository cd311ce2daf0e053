package main

import (
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServicePrint: service install --print shows, for each platform, a
// file that runs strata node with the flags given, restarts it on
// failure, stops it with SIGTERM and logs to DATA_DIR/node.log; systemd
// checks the unit where systemd-analyze is installed, and the plist is
// well-formed XML.
func TestServicePrint(t *testing.T) {
	dataDir := t.TempDir()
	for _, goos := range []string{"linux", "darwin"} {
		out, err := run(t, "service", "install", "--print", "--platform", goos, "--data-dir", dataDir, "--memory", "96GB", "--join", "/ip4/10.0.0.2/tcp/7341/p2p/Q m", "--drain-timeout", "1m")
		if err != nil {
			t.Fatalf("%s: %v", goos, err)
		}
		header, body, _ := strings.Cut(out, "\n")
		log := filepath.Join(dataDir, nodeLogFile)
		switch goos {
		case "linux":
			for _, want := range []string{"node --data-dir " + dataDir + " --memory 96GB --join \"/ip4/10.0.0.2/tcp/7341/p2p/Q m\" --drain-timeout 1m\n",
				"Restart=on-failure", "KillSignal=SIGTERM", "TimeoutStopSec=90", "LimitNOFILE=65536", "StandardOutput=append:" + log, "WantedBy="} {
				if !strings.Contains(body, want) {
					t.Errorf("unit lacks %q:\n%s", want, body)
				}
			}
			if !strings.HasSuffix(header, systemdUnit) {
				t.Errorf("unit path %q", header)
			}
			if sa, err := exec.LookPath("systemd-analyze"); err == nil {
				unit := filepath.Join(t.TempDir(), systemdUnit)
				os.WriteFile(unit, []byte(body), 0o644)
				if out, err := exec.Command(sa, "verify", unit).CombinedOutput(); err != nil {
					t.Errorf("systemd-analyze verify: %v\n%s", err, out)
				}
			} else {
				t.Log("no systemd-analyze here: the unit was checked by its text only")
			}
		case "darwin":
			for _, want := range []string{"<string>" + launchdLabel + "</string>", "<string>--memory</string>\n\t\t<string>96GB</string>",
				"<string>/ip4/10.0.0.2/tcp/7341/p2p/Q m</string>", "<key>SuccessfulExit</key>\n\t\t<false/>", "<key>RunAtLoad</key>\n\t<true/>",
				"<key>ExitTimeOut</key>\n\t<integer>90</integer>", "<key>StandardErrorPath</key>\n\t<string>" + log + "</string>", "<key>NumberOfFiles</key>"} {
				if !strings.Contains(body, want) {
					t.Errorf("plist lacks %q:\n%s", want, body)
				}
			}
			if !strings.HasSuffix(header, "Library/LaunchAgents/"+launchdLabel+".plist") {
				t.Errorf("plist path %q", header)
			}
			dec := xml.NewDecoder(strings.NewReader(body))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("plist is not well-formed XML: %v", err)
				}
			}
		}
	}
}

func TestServiceRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"service", "install", "--print", "--secret", "0123456789abcdef0123456789abcdef"}, "every user can read"},
		{[]string{"service", "install", "--print", "--api-key", "k"}, "DATA_DIR/config.toml"},
		{[]string{"service", "install", "--print", "--memroy", "1GB"}, "unknown flag: --memroy"},
		{[]string{"service", "install", "--print", "--platform", "plan9"}, "not plan9"},
		{[]string{"service", "restart"}, "install, uninstall or status"},
	} {
		if _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestLogsTail(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, nodeLogFile), []byte("one\ntwo\nthree\n"), 0o600)
	if out, err := run(t, "logs", "--data-dir", dir, "-n", "2"); err != nil || out != "two\nthree\n" {
		t.Errorf("logs -n 2: %q %v", out, err)
	}
	if out, err := run(t, "logs", "--data-dir", dir, "-n", "0"); err != nil || out != "one\ntwo\nthree\n" {
		t.Errorf("logs -n 0: %q %v", out, err)
	}
	if _, err := run(t, "logs", "--data-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "strata service install") {
		t.Errorf("no log: %v", err)
	}
}
