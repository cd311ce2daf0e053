// Package chattemplate renders a model's chat template: Jinja source from
// a GGUF file, which is as untrusted as the file. The template library
// (github.com/ardanlabs/jinja) has no limits of its own: a macro that
// calls itself overflows the Go stack, which is fatal to the whole
// process and cannot be recovered, and range(10**9) or 'x' * 10**10
// exhausts memory, also fatally. No check from outside a Go program can
// stop those, so templates render in a worker process: this program's own
// binary started again with an environment variable this package's init
// looks for. The worker caps its stack and memory and dies when it breaks
// them; the caller kills it when a render takes too long and starts
// another for the next render.
//
// ErrRefused is the template's own verdict (raise_exception); any other
// error means it does not compile or broke a limit, and the caller uses a
// plain prompt (ExampleRender).
//
// Any binary that links this package (the strata command, test binaries)
// can serve as its own worker.
package chattemplate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Errors. ErrRefused is the template's own error (raise_exception, an
// undefined name it insists on): the messages are at fault. The others
// say the template cannot be used at all, with these messages or any.
var (
	ErrRefused = errors.New("chattemplate: the template refused the messages")
	ErrCompile = errors.New("chattemplate: the template does not compile")
	ErrLimit   = errors.New("chattemplate: the template broke a limit")
	ErrWorker  = errors.New("chattemplate: the template worker failed")
)

// Limits bound one render. The zero value of a field means its default.
type Limits struct {
	// Timeout is the wall-clock time of one render; 0 = 2 s.
	Timeout time.Duration
	// MaxSource is the longest template source accepted; 0 = 1 MiB (real
	// templates are under 100 KiB).
	MaxSource int
	// MaxOutput is the longest rendered prompt; 0 = 32 MiB.
	MaxOutput int
	// MaxMemory is the memory the worker's Go runtime may hold; 0 = 512 MiB.
	MaxMemory uint64
	// MaxStack is the largest goroutine stack in the worker; 0 = 64 MiB.
	MaxStack int
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Second
	}
	if l.MaxSource <= 0 {
		l.MaxSource = 1 << 20
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = 32 << 20
	}
	if l.MaxMemory == 0 {
		l.MaxMemory = 512 << 20
	}
	if l.MaxStack <= 0 {
		l.MaxStack = 64 << 20
	}
	return l
}

// Renderer renders templates in worker processes it starts on demand and
// keeps for the next render. It is safe for concurrent use; renders run
// one at a time per worker, on at most Workers workers.
type Renderer struct {
	// Limits bound every render.
	Limits Limits
	// Workers is how many renders may run at once; 0 = 2.
	Workers int

	once sync.Once
	idle chan *worker
	slot chan struct{}
}

// Default is the Renderer Render uses.
var Default = &Renderer{}

// Render renders src with vars on Default.
func Render(ctx context.Context, src string, vars map[string]any) (string, error) {
	return Default.Render(ctx, src, vars)
}

// Render renders src with vars (JSON values: maps, slices, strings,
// numbers, booleans, and json.RawMessage). Objects keep the order of
// their keys as written in JSON, as Python's dicts do for Hugging Face's
// renderer: a map's keys are sorted (encoding/json), so a value whose
// order matters to the template's tojson (tools, a call's arguments)
// is best passed as json.RawMessage or a struct. It returns ErrRefused when the template raised an
// error, ErrCompile when it does not compile, ErrLimit when it broke a
// limit (or crashed its worker), ErrWorker when no worker could run it,
// or ctx.Err().
func (r *Renderer) Render(ctx context.Context, src string, vars map[string]any) (string, error) {
	r.once.Do(func() {
		n := r.Workers
		if n <= 0 {
			n = 2
		}
		r.idle = make(chan *worker, n)
		r.slot = make(chan struct{}, n)
	})
	lim := r.Limits.withDefaults()
	if len(src) > lim.MaxSource {
		return "", fmt.Errorf("%w: the source has %d bytes, more than %d", ErrLimit, len(src), lim.MaxSource)
	}
	vb, err := json.Marshal(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrWorker, err)
	}
	req, err := json.Marshal(request{Source: src, Vars: vb, MaxOutput: lim.MaxOutput, MaxMemory: lim.MaxMemory, MaxStack: lim.MaxStack})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrWorker, err)
	}
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-r.slot }()
	var w *worker
	select {
	case w = <-r.idle:
	default:
		if w, err = startWorker(); err != nil {
			return "", err
		}
	}
	resp, err := w.call(ctx, req, lim)
	if err != nil {
		w.kill()
		return "", err
	}
	r.idle <- w // room: there are at most as many workers as slots
	switch resp.Kind {
	case "":
		return resp.Output, nil
	case kindRefused:
		return "", fmt.Errorf("%w: %s", ErrRefused, resp.Error)
	case kindCompile:
		return "", fmt.Errorf("%w: %s", ErrCompile, resp.Error)
	default:
		return "", fmt.Errorf("%w: %s", ErrLimit, resp.Error)
	}
}

// Close stops the idle workers (busy ones stop when their render ends and
// the next Close runs; the operating system ends them with this process).
func (r *Renderer) Close() {
	if r.idle == nil {
		return
	}
	for {
		select {
		case w := <-r.idle:
			w.kill()
		default:
			return
		}
	}
}

// Kinds of a worker's failed response.
const (
	kindRefused = "refused"
	kindCompile = "compile"
	kindLimit   = "limit"
)

type request struct {
	Source    string          `json:"source"`
	Vars      json.RawMessage `json:"vars"` // an object
	MaxOutput int             `json:"max_output"`
	MaxMemory uint64          `json:"max_memory"`
	MaxStack  int             `json:"max_stack"`
}

type response struct {
	Output string `json:"output"`
	Kind   string `json:"kind,omitempty"`
	Error  string `json:"error,omitempty"`
}

// workerEnv, set to workerMagic, turns a process into a template worker
// (see init in worker.go).
const (
	workerEnv   = "STRATA_CHATTEMPLATE_WORKER"
	workerMagic = "strata-chattemplate-worker-1"
)

// worker is one worker process: requests go out on its fd 3, answers come
// back on its fd 4, each a 4-byte little-endian length and that much JSON.
type worker struct {
	cmd    *exec.Cmd
	in     *os.File // our end of the worker's fd 3
	out    *os.File // our end of the worker's fd 4
	stderr *tailBuffer
	done   chan struct{} // closed when the process has exited
}

func startWorker() (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorker, err)
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorker, err)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, fmt.Errorf("%w: %v", ErrWorker, err)
	}
	cmd := exec.Command(exe)
	// Nothing of this process's environment (API keys, the cluster's
	// secret) goes to the worker: it needs none of it.
	cmd.Env = []string{workerEnv + "=" + workerMagic, "GOMAXPROCS=2"}
	cmd.ExtraFiles = []*os.File{reqR, respW}
	cmd.Stdin, cmd.Stdout = nil, nil
	w := &worker{cmd: cmd, in: reqW, out: respR, stderr: &tailBuffer{max: 2048}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	err = cmd.Start()
	reqR.Close()
	respW.Close()
	if err != nil {
		reqW.Close()
		respR.Close()
		return nil, fmt.Errorf("%w: starting %s: %v", ErrWorker, exe, err)
	}
	go func() { cmd.Wait(); close(w.done) }()
	return w, nil
}

// call sends one request and waits for its answer, at most lim.Timeout.
// An error means the worker is unusable (the caller kills it).
func (w *worker) call(ctx context.Context, req []byte, lim Limits) (response, error) {
	type result struct {
		resp response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		var res result
		if err := writeFrame(w.in, req); err != nil {
			res.err = err
		} else {
			var b []byte
			if b, res.err = readFrame(w.out, lim.MaxOutput+(1<<16)); res.err == nil {
				res.err = json.Unmarshal(b, &res.resp)
			}
		}
		got <- res
	}()
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	select {
	case res := <-got:
		if res.err != nil {
			w.kill() // and wait for it, so stderr says why it died
			return response{}, fmt.Errorf("%w: the worker died: %s", ErrLimit, w.why(res.err))
		}
		return res.resp, nil
	case <-timer.C:
		return response{}, fmt.Errorf("%w: the render took more than %s", ErrLimit, lim.Timeout)
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
}

// why describes how the worker failed: the first line of what it printed
// (the Go runtime's fatal error), else err.
func (w *worker) why(err error) string {
	if line, _, _ := strings.Cut(strings.TrimSpace(w.stderr.String()), "\n"); line != "" {
		return line
	}
	return err.Error()
}

func (w *worker) kill() {
	w.cmd.Process.Kill()
	<-w.done
	w.in.Close()
	w.out.Close()
}

func writeFrame(w io.Writer, b []byte) error {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readFrame(r io.Reader, max int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if uint64(size) > uint64(max) {
		return nil, fmt.Errorf("a frame of %d bytes, more than %d", size, max)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// tailBuffer keeps the first max bytes written to it (a Go fatal error
// starts with its reason; the goroutine dump after it can be long).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Key is a short digest of a template source, for logs and caches.
func Key(src string) string {
	d := sha256.Sum256([]byte(src))
	return fmt.Sprintf("%x", d[:6])
}
