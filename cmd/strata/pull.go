package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"strata/internal/hfhub"
	"strata/internal/units"
	"strata/runtime/catalog"
)

func init() { extraCommands = append(extraCommands, pullCmd) }

func pullCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pull REPO[:QUANT] | pull REPO FILE",
		Short: "Download a GGUF model (all its split parts) from Hugging Face into the HF cache",
		Long: `pull downloads a model from the Hugging Face hub into the hub's cache
($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), where
huggingface_hub, llama.cpp and strata all find it.

REPO:QUANT picks the file as llama.cpp's -hf does: the first GGUF model file
whose name holds QUANT followed by "." or "-" (any case); with no QUANT,
Q4_K_M, then Q8_0, then the first GGUF. REPO FILE names the file. A split
model comes with all its parts.

Downloads resume after a cut (also in a later run), are checked against
the SHA-256 the hub publishes before they count, and a model already in the
cache is not fetched again. HF_TOKEN (or $HF_HOME/token) is sent to the hub
for gated repositories, never to the storage it redirects to; HF_ENDPOINT
points at another hub; HF_HUB_OFFLINE=1 only looks in the cache.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, tag, err := hfhub.ParseRef(args[0])
			if err != nil {
				return err
			}
			file := ""
			if len(args) == 2 {
				if tag != "" {
					return fmt.Errorf("give REPO:QUANT or REPO FILE, not both")
				}
				file = args[1]
			}
			c := hfhub.FromEnv()
			errOut := cmd.ErrOrStderr()
			p := newProgress(errOut)
			c.Progress = p.update
			c.Logf = func(format string, args ...any) { p.line(fmt.Sprintf(format, args...)) }
			paths, err := c.Pull(cmd.Context(), repo, tag, file)
			p.finish()
			if err != nil {
				return err
			}
			var size int64
			for _, path := range paths {
				if fi, err := os.Stat(path); err == nil {
					size += fi.Size()
				}
			}
			parts := ""
			if len(paths) > 1 {
				parts = fmt.Sprintf(", %d parts", len(paths))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s%s in %s\n", catalog.Name(paths[0]), units.Bytes(uint64(size)), parts, paths[0])
			return nil
		},
	}
	return cmd
}

// progress draws one line per file: a bar with speed and ETA on a
// terminal (redrawn in place), plain lines at most every few seconds and
// at the end otherwise (logs and pipes).
type progress struct {
	w   io.Writer
	tty bool

	mu              sync.Mutex
	file            string
	start, lastLine time.Time
	startBytes      int64
	drawn           bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(file string, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if file != p.file {
		if p.drawn {
			fmt.Fprintln(p.w)
		}
		p.file, p.start, p.startBytes, p.drawn, p.lastLine = file, now, done, false, time.Time{}
	}
	el := now.Sub(p.start).Seconds()
	speed := 0.0
	if el > 0 {
		speed = float64(done-p.startBytes) / el
	}
	eta := "--"
	if speed > 0 && total > done {
		eta = time.Duration(float64(total-done) / speed * float64(time.Second)).Round(time.Second).String()
	} else if total > 0 && done >= total {
		eta = "done"
	}
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	name := file
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if p.tty {
		const width = 30
		fill := int(pct / 100 * width)
		bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		fmt.Fprintf(p.w, "\r%-40.40s [%s] %5.1f%% %10s/%-10s %9s/s ETA %s\033[K", name, bar, pct,
			units.Bytes(uint64(done)), units.Bytes(uint64(total)), units.Bytes(uint64(speed)), eta)
		p.drawn = true
		return
	}
	if done < total && now.Sub(p.lastLine) < 5*time.Second && !p.lastLine.IsZero() {
		return
	}
	if done < total && p.lastLine.IsZero() && done == p.startBytes && done > 0 {
		fmt.Fprintf(p.w, "%s: resuming at %s of %s\n", name, units.Bytes(uint64(done)), units.Bytes(uint64(total)))
	}
	p.lastLine = now
	fmt.Fprintf(p.w, "%s: %s of %s (%.0f%%), %s/s, ETA %s\n", name, units.Bytes(uint64(done)), units.Bytes(uint64(total)), pct, units.Bytes(uint64(speed)), eta)
}

// line prints a message (a retry, a rate limit) without breaking the bar.
func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	fmt.Fprintln(p.w, s)
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
