package api

import (
	"context"
	"os"
	"os/exec"
	"strata/internal/doctor"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium. A missing browser fails the test:
// make deps installs it, so its absence is a broken setup.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: apt-get install chromium (make deps does)")
	return ""
}

// TestDashboardInChromium loads the dashboard in headless Chromium, gives
// it the API key it asks for, checks the cluster picture, sends a prompt
// and sees the answer stream in.
func TestDashboardInChromium(t *testing.T) {
	exe := chromiumPath(t)
	_, hs := newTestServer(t, Config{APIKey: "dash-key"})
	tok := storiesEngine(t).Tokenizer
	const prompt = "Once upon a time"
	want := expected(t, tok.Encode(prompt, true, false), 24, nil).Text

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()

	// No key yet: the page asks for one.
	must(t, chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")))
	must(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.ID("keyform")),
		chromedp.SendKeys(chromedp.ID("apikey"), "dash-key"),
		chromedp.Click(chromedp.CSS("#keyform button")),
		// The cluster picture: one node holding layers 0-4 of stories260K.
		chromedp.WaitReady(chromedp.CSS(`#cluster g.node[data-peer="local"]`)),
	))
	poll(t, ctx, `document.querySelector("#model").options.length > 0 && document.querySelector("#cluster g.node").textContent.includes("of 5")`)
	nodeText := run(t, ctx, chromedp.TextContent(chromedp.CSS("#cluster g.node")))
	if kf := run(t, ctx, chromedp.AttributeValue(chromedp.ID("keyform"), "hidden")); !kf.Exists {
		t.Error("the key form is still shown")
	}

	// Chat: greedy, 24 tokens.
	must(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("temp"), "0"),
		chromedp.SetValue(chromedp.ID("maxtokens"), "24"),
		chromedp.SendKeys(chromedp.ID("prompt"), prompt),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitReady(chromedp.CSS(`.msg.assistant[data-done="1"]`)),
	))
	answer := run(t, ctx, chromedp.TextContent(chromedp.CSS(".msg.assistant")))
	chunks := run(t, ctx, chromedp.AttributeValue(chromedp.CSS(".msg.assistant"), "data-chunks")).Value
	finish := run(t, ctx, chromedp.AttributeValue(chromedp.CSS(".msg.assistant"), "data-finish")).Value
	// The stats line catches up with the generated tokens on its next poll.
	poll(t, ctx, `document.querySelector("#generated").textContent === "24"`)
	generated := run(t, ctx, chromedp.TextContent(chromedp.ID("generated")))
	if path := os.Getenv("STRATA_DASHBOARD_SCREENSHOT"); path != "" { // to look at it
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(path, png, 0o644)
		}
	}
	// A three-node picture: every node, and the ring of an active session as links.
	three := func() ClusterStatus {
		m := func(id string, a, b int) MemberStatus {
			return MemberStatus{PeerID: id, MemoryBytes: 2 << 20, Models: []string{"stories260K"}, Shards: []ShardStatus{{Model: "stories260K", Layers: [2]int{a, b}}}}
		}
		return ClusterStatus{Self: "12D3KooWAAAAAAAAAAAA", Members: []MemberStatus{m("12D3KooWAAAAAAAAAAAA", 0, 2), m("12D3KooWBBBBBBBBBBBB", 2, 4), m("12D3KooWCCCCCCCCCCCC", 4, 5)},
			Sessions: []SessionStatus{{ID: "s1", Model: "stories260K", Prompt: 5, Generated: 9, Stages: []StageStatus{
				{PeerID: "12D3KooWAAAAAAAAAAAA", Layers: [2]int{0, 2}}, {PeerID: "12D3KooWBBBBBBBBBBBB", Layers: [2]int{2, 4}}, {PeerID: "12D3KooWCCCCCCCCCCCC", Layers: [2]int{4, 5}}}}}}
	}
	withFetch := func() ClusterStatus {
		c := three()
		c.Members[2].Fetching = []FetchStatus{{Model: "stories260K", DoneBytes: 300e3, TotalBytes: 1200e3}}
		c.Members[1].Device = "Apple M3 Ultra (integrated)"
		return c
	}
	// strata doctor's report as the node serves it: one link on TCP where
	// shared memory was possible, and a member whose clock is off.
	report := func(bool) doctor.Report {
		return doctor.NewReport([]doctor.Check{
			{Name: "members", Status: doctor.OK, Message: "3 members"},
			{Name: "clock", Node: "12D3KooWCCCCCCCCCCCC", Status: doctor.Fail, Message: "its clock is 5s off this node's", Fix: "turn on time synchronisation"},
			{Name: "link", Status: doctor.OK, Message: "AAAAAAAA ↔ BBBBBBBB: shm, round trip 45µs"},
			{Name: "link", Status: doctor.Fail, Message: "AAAAAAAA ↔ CCCCCCCC: TCP, although both run on one host (shared memory is many times faster)", Fix: "start both nodes with --transport auto (the default), not tcp"},
		})
	}
	srv3, hs3 := newTestServer(t, Config{Cluster: withFetch, Doctor: report})
	srv3.Metrics().ObserveHop("12D3KooWBBBBBBBBBBBB", 2*time.Millisecond)
	srv3.Metrics().AddBytesSent("12D3KooWBBBBBBBBBBBB", 3<<20)
	must(t, chromedp.Do(ctx, chromedp.Navigate(hs3.URL+"/")))
	poll(t, ctx, `document.querySelectorAll("#cluster g.node").length === 3 && document.querySelectorAll("#cluster path.link").length === 3 &&
		document.querySelector("#sessions tbody").rows.length === 1 && document.querySelector("#cluster").textContent.includes("2.0 ms")`)
	// The owner's view: the fetch in progress on its node's card, a GPU
	// node's device on its card, the
	// findings with their fixes, the links (the TCP one stands out), and
	// the chart of the last minutes once two samples are in.
	poll(t, ctx, `document.querySelector("#cluster").textContent.includes("fetching stories260K: 300 KB of 1.2 MB") &&
		document.querySelector("#cluster g.node[data-peer='12D3KooWBBBBBBBBBBBB']").textContent.includes("device: Apple M3 Ultra (integrated)") &&
		document.querySelectorAll("#links tbody tr").length === 2 && document.querySelectorAll("#links tbody tr.fail").length === 1 &&
		document.querySelector("#links tbody tr.fail").textContent.includes("tcp") &&
		document.querySelector("#findings li.fail").textContent.includes("clock [12D3Ko…CCCCCC]: its clock is 5s off") &&
		document.querySelector("#findings li.fail .fix").textContent.includes("time synchronisation") &&
		document.querySelector("#health-summary").textContent.includes("2 failed") &&
		document.querySelectorAll("#history polyline.tps").length === 1 && document.querySelectorAll("#history polyline.queue").length === 1`)
	if path := os.Getenv("STRATA_DASHBOARD_SCREENSHOT"); path != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(strings.TrimSuffix(path, ".png")+"-3.png", png, 0o644)
		}
	}

	if !strings.Contains(nodeText, "stories260K: layers 0–4 of 5") || !strings.Contains(nodeText, "this node") {
		t.Errorf("node card: %q", nodeText)
	}
	if answer != want {
		t.Errorf("answer %q, want %q", answer, want)
	}
	if n, _ := strconv.Atoi(chunks); n < 2 {
		t.Errorf("answer arrived in %s chunk(s), want it streamed", chunks)
	}
	if finish != "length" || generated != "24" {
		t.Errorf("finish %q, generated %q", finish, generated)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// poll waits until a JavaScript expression is true in the page.
func poll(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}
