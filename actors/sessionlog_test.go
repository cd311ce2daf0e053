package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/engine"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSessionLogLine: the origin writes one line per session with its
// outcome, tokens, rates and recoveries (here as JSON, as --log-format
// json writes it).
func TestSessionLogLine(t *testing.T) {
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	models := t.TempDir()
	if err := os.Symlink(testdata.Path(t, "gguf/stories260K.gguf"), filepath.Join(models, "stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	nodes := startNodesFn(t, models, 512, 2, 1100e3, 1, func(i int, cfg *NodeConfig) { cfg.Origin.Logger = logger })
	if _, err := nodes[1].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 20}, func(engine.Token) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `"msg":"session"`) {
			if line != nil {
				t.Fatalf("two session lines for one session:\n%s", buf.String())
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil {
		t.Fatalf("no session line in:\n%s", buf.String())
	}
	if line["outcome"] != "ok" || line["model"] != "stories260K" || line["tokens"] != 20.0 || line["recoveries"] != 0.0 ||
		line["stages"] != 2.0 || line["finish"] != "length" || line["decode_tok_s"] == nil || len(line["session"].(string)) != 12 {
		t.Errorf("session line %v", line)
	}
}
