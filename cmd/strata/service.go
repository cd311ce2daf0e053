package main

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, serviceCmd, logsCmd) }

// nodeLogFile, in the data directory, is where a node run as a service
// writes its log (strata logs reads it).
const nodeLogFile = "node.log"

// The service's names: the systemd unit and the launchd label.
const (
	systemdUnit  = "strata.service"
	launchdLabel = "org.strata.node"
)

// serviceSpec is what a service file says.
type serviceSpec struct {
	Binary  string   // absolute path of strata
	DataDir string   // absolute
	Args    []string // node flags
	System  bool     // systemd: a system unit (root) rather than a user one
	Drain   time.Duration
}

// nodeCommand is the node's command line.
func (s serviceSpec) nodeCommand() []string {
	return append([]string{s.Binary, "node", "--data-dir", s.DataDir}, s.Args...)
}

// systemdUnitFile is a unit that starts the node at boot, restarts it when
// it fails, gives it time to leave gracefully on stop, and appends its log
// to DATA_DIR/node.log.
func systemdUnitFile(s serviceSpec) string {
	var q []string
	for _, a := range s.nodeCommand() {
		q = append(q, systemdQuote(a))
	}
	log := filepath.Join(s.DataDir, nodeLogFile)
	target := "default.target"
	if s.System {
		target = "multi-user.target"
	}
	return fmt.Sprintf(`# Written by strata service install; strata service uninstall removes it.
[Unit]
Description=strata node: one large language model on many machines
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=%s
Restart=on-failure
RestartSec=5
# SIGTERM is a graceful leave: no new sessions, shards move, answers finish.
KillSignal=SIGTERM
TimeoutStopSec=%d
LimitNOFILE=65536
StandardOutput=append:%s
StandardError=append:%s

[Install]
WantedBy=%s
`, strings.Join(q, " "), int((s.Drain + 30*time.Second).Seconds()), log, log, target)
}

// systemdQuote quotes one word of ExecStart when it needs it.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// launchdPlist is a launch agent that starts the node at login (and at
// boot for an agent loaded in the system domain), restarts it when it
// exits with an error, and writes its log to DATA_DIR/node.log.
func launchdPlist(s serviceSpec) string {
	var args strings.Builder
	for _, a := range s.nodeCommand() {
		fmt.Fprintf(&args, "\t\t<string>%s</string>\n", html.EscapeString(a))
	}
	log := html.EscapeString(filepath.Join(s.DataDir, nodeLogFile))
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by strata service install; strata service uninstall removes it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>%s</string>
	<key>ProgramArguments</key>
	<array>
%s	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>5</integer>
	<key>ExitTimeOut</key>
	<integer>%d</integer>
	<key>SoftResourceLimits</key>
	<dict>
		<key>NumberOfFiles</key>
		<integer>65536</integer>
	</dict>
	<key>StandardOutPath</key>
	<string>%s</string>
	<key>StandardErrorPath</key>
	<string>%s</string>
</dict>
</plist>
`, launchdLabel, args.String(), int((s.Drain + 30*time.Second).Seconds()), log, log)
}

// serviceFile is where the service file goes on platform goos.
func serviceFile(goos string, system bool) (string, error) {
	home, err := os.UserHomeDir()
	switch {
	case goos == "darwin" && err == nil:
		return filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist"), nil
	case goos == "linux" && system:
		return filepath.Join("/etc/systemd/system", systemdUnit), nil
	case goos == "linux" && err == nil:
		return filepath.Join(home, ".config", "systemd", "user", systemdUnit), nil
	case goos != "linux" && goos != "darwin":
		return "", fmt.Errorf("strata service knows systemd (Linux) and launchd (macOS), not %s", goos)
	}
	return "", err
}

func serviceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service install|uninstall|status [--print] [node flags]",
		Short: "Run strata node as a service: a systemd unit on Linux, a launchd agent on macOS",
		Long: `service install writes a service that runs strata node with the node flags
given (and --data-dir): started at boot (Linux: a system unit when run as
root, else a user unit, which starts at boot once "loginctl enable-linger"
is set for the user; macOS: a launch agent in ~/Library/LaunchAgents),
restarted when it fails, stopped with SIGTERM (a graceful leave) and with
its log appended to DATA_DIR/node.log (strata logs reads it). It then
enables and starts it. --print shows the file without installing
(--platform linux|darwin shows the other system's).

service uninstall stops and removes it; service status shows what the
service manager says about it.`,
		DisableFlagParsing: true,
		Args:               cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "-h" || args[0] == "--help" {
				return cmd.Help()
			}
			return runService(cmd.OutOrStdout(), args[0], args[1:])
		},
	}
	return cmd
}

// runService carries out strata service ACTION ARGS.
func runService(out io.Writer, action string, args []string) error {
	goos, print := runtime.GOOS, false
	var nodeArgs []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--print":
			print = true
		case a == "--platform" && i+1 < len(args):
			goos = args[i+1]
			i++
		case strings.HasPrefix(a, "--platform="):
			goos = strings.TrimPrefix(a, "--platform=")
		default:
			nodeArgs = append(nodeArgs, a)
		}
	}
	// The node flags are checked here, not when the service first starts.
	node := nodeCmd()
	fs := node.Flags()
	fs.AddFlagSet(node.PersistentFlags())
	if err := fs.Parse(nodeArgs); err != nil {
		return fmt.Errorf("node flags: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("node takes flags only, not %q", fs.Args())
	}
	for _, name := range []string{"secret", "api-key"} {
		if fs.Lookup(name).Changed {
			return fmt.Errorf("--%s would be written into the service file, which every user can read: put it in DATA_DIR/config.toml (mode 0600) or, for the secret, use --secret-file or DATA_DIR/secret", name)
		}
	}
	dataDir, _ := fs.GetString("data-dir")
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	drain, _ := fs.GetDuration("drain-timeout")
	var passed []string
	for i := 0; i < len(nodeArgs); i++ { // --data-dir is written once, first
		a := nodeArgs[i]
		if a == "--data-dir" {
			i++
			continue
		}
		if !strings.HasPrefix(a, "--data-dir=") {
			passed = append(passed, a)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	spec := serviceSpec{Binary: bin, DataDir: dataDir, Args: passed, System: os.Geteuid() == 0, Drain: drain}
	path, err := serviceFile(goos, spec.System)
	if err != nil {
		return err
	}
	content := systemdUnitFile(spec)
	if goos == "darwin" {
		content = launchdPlist(spec)
	}
	switch action {
	case "install":
		if print {
			fmt.Fprintf(out, "# %s\n%s", path, content)
			return nil
		}
		if goos != runtime.GOOS {
			return fmt.Errorf("--platform %s: install on that system (--print shows the file)", goos)
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", path)
		if err := serviceManager(out, goos, spec.System, "install", path); err != nil {
			return err
		}
		fmt.Fprintf(out, "strata node runs as a service; its log: strata logs --data-dir %s\n", dataDir)
		if goos == "linux" && !spec.System {
			fmt.Fprintln(out, "to start it at boot, before anyone logs in: sudo loginctl enable-linger $USER")
		}
		return nil
	case "uninstall":
		if err := serviceManager(out, goos, spec.System, "uninstall", path); err != nil {
			fmt.Fprintf(out, "(%v)\n", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		fmt.Fprintf(out, "removed %s\n", path)
		return nil
	case "status":
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("no strata service is installed (%s)", path)
		}
		return serviceManager(out, goos, spec.System, "status", path)
	}
	return fmt.Errorf("service %q: install, uninstall or status", action)
}

// serviceManager runs systemctl or launchctl for action.
func serviceManager(out io.Writer, goos string, system bool, action, path string) error {
	var cmds [][]string
	switch goos {
	case "linux":
		ctl := []string{"systemctl"}
		if !system {
			ctl = append(ctl, "--user")
		}
		with := func(args ...string) []string { return append(append([]string(nil), ctl...), args...) }
		switch action {
		case "install":
			cmds = [][]string{with("daemon-reload"), with("enable", "--now", systemdUnit)}
		case "uninstall":
			cmds = [][]string{with("disable", "--now", systemdUnit), with("daemon-reload")}
		case "status":
			cmds = [][]string{with("status", "--no-pager", systemdUnit)}
		}
	case "darwin":
		domain := fmt.Sprintf("gui/%d", os.Getuid())
		switch action {
		case "install":
			cmds = [][]string{{"launchctl", "bootstrap", domain, path}}
		case "uninstall":
			cmds = [][]string{{"launchctl", "bootout", domain + "/" + launchdLabel}}
		case "status":
			cmds = [][]string{{"launchctl", "print", domain + "/" + launchdLabel}}
		}
	}
	for _, c := range cmds {
		var buf bytes.Buffer
		x := exec.Command(c[0], c[1:]...)
		x.Stdout, x.Stderr = &buf, &buf
		err := x.Run()
		out.Write(buf.Bytes())
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
	}
	return nil
}

func logsCmd() *cobra.Command {
	var dataDir string
	var lines int
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs [--data-dir D] [-n 50] [-f]",
		Short: "Print the log of the node run as a service (DATA_DIR/node.log)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := filepath.Join(dataDir, nodeLogFile)
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("%w (strata service install writes the node's log there)", err)
			}
			defer f.Close()
			out := cmd.OutOrStdout()
			if err := tailLines(f, out, lines); err != nil {
				return err
			}
			for follow {
				if _, err := io.Copy(out, f); err != nil {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(250 * time.Millisecond):
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "the node's data directory")
	cmd.Flags().IntVarP(&lines, "lines", "n", 50, "how many of the last lines to print (0: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing lines as they are written")
	return cmd
}

// tailLines writes the last n lines of f (all when n <= 0) and leaves f at
// its end.
func tailLines(f *os.File, out io.Writer, n int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	const window = 1 << 20 // read at most the last MiB for the tail
	start := int64(0)
	if n > 0 && st.Size() > window {
		start = st.Size() - window
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if n > 0 {
		ls := strings.SplitAfter(string(b), "\n")
		if ls[len(ls)-1] == "" {
			ls = ls[:len(ls)-1]
		}
		b = []byte(strings.Join(ls[max(0, len(ls)-n):], ""))
	}
	_, err = out.Write(b)
	return err
}
