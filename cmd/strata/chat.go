package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strata/runtime/catalog"
	"strata/runtime/model"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"

	"strata/api"
	"strata/runtime/engine"
)

func init() { extraCommands = append(extraCommands, chatCmd) }

func chatCmd() *cobra.Command {
	var (
		apiURL    string
		apiKey    string
		modelName string
		system    string
		temp      float64
		maxTokens int
		threads   int
		ctxLen    int
		speculate string
		gf        gpuFlags
	)
	cmd := &cobra.Command{
		Use:   "chat [--api URL] [--model NAME|PATH]",
		Short: "Chat with a model in the terminal, through a node's OpenAI-compatible API",
		Long: `chat opens an interactive prompt that talks to the node serving --api
(strata node; default http://127.0.0.1:7340). Line editing and history
(~/.strata_history) as in a shell; pasted text with several lines is sent
as one message, and so is text between lines of """ or lines that end in
a backslash. Ctrl-C stops the answer being written, not the program;
Ctrl-D or /exit leaves.

Commands: /model [NAME] lists or switches models, /temp [T] shows or sets
the temperature, /system [TEXT] sets the system prompt, /clear forgets the
conversation, /stats shows the last answer's timings, /help.

With no node answering at --api, chat runs the model --model names (a path
to a GGUF file) in this process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if apiKey == "" {
				apiKey = os.Getenv("STRATA_API_KEY")
			}
			if temp < 0 || temp > 2 {
				return fmt.Errorf("--temperature must be between 0 and 2")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			base := apiURL
			if !strings.Contains(base, "://") {
				base = "http://" + base
			}
			base = strings.TrimSuffix(base, "/")
			source, draft, err := parseSpeculateFlag(speculate, false)
			if err != nil {
				return err
			}
			device, layers, err := gf.parse()
			if err != nil {
				return err
			}
			c := &chatClient{base: base, key: apiKey, http: &http.Client{}}
			list, err := c.models(ctx)
			var unreachable *unreachableError
			switch {
			case errors.As(err, &unreachable):
				node, err := startInProcess(ctx, inProcessOptions{Model: modelName, Threads: threads, Context: ctxLen, Speculate: source, Draft: draft,
					GPU: device, GPULayers: layers})
				if err != nil {
					return fmt.Errorf("no node answers at %s (%v), and none could start here: %w", base, unreachable.err, err)
				}
				defer node.Stop()
				fmt.Fprintf(cmd.ErrOrStderr(), "no node answers at %s; running %s in this process\n", base, node.Model)
				c.base, c.key = node.URL, ""
				modelName = node.Model
				if list, err = c.models(ctx); err != nil {
					return err
				}
			case err != nil:
				return err
			case source != "" && source != engine.SpeculateOff:
				return fmt.Errorf("--speculate %s: the node at %s answers; a node speculates as its owner set it (strata node --speculate)", speculate, base)
			}
			if looksLikePath(modelName) {
				modelName = catalog.Name(modelName)
			}
			if modelName == "" {
				if len(list) == 0 {
					return fmt.Errorf("the node at %s serves no model", c.base)
				}
				modelName = list[0]
			}
			in, closeIn, err := newLineReader(cmd.InOrStdin(), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer closeIn()

			// Ctrl-C while an answer streams cancels that answer (at the
			// prompt the line editor sees it as a key instead).
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt)
			defer signal.Stop(sigs)
			interrupts := make(chan struct{}, 1)
			go func() {
				for range sigs {
					select {
					case interrupts <- struct{}{}:
					default:
					}
				}
			}()

			s := &chatSession{client: c, in: in, out: cmd.OutOrStdout(), model: modelName, models: list, system: system,
				temp: temp, maxTokens: maxTokens, interrupts: interrupts}
			return s.run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&apiURL, "api", "http://"+api.DefaultAddr, "URL of the node's API")
	f.StringVar(&apiKey, "api-key", "", "API key of the node (default $STRATA_API_KEY)")
	f.StringVar(&modelName, "model", "", "model name on the node; with no node running, a path to a GGUF file to run here")
	f.StringVar(&system, "system", "", "system prompt")
	f.Float64Var(&temp, "temperature", 0.7, "sampling temperature (0: greedy)")
	f.IntVar(&maxTokens, "max-tokens", 0, "most tokens per answer (0: until the model stops or the context is full)")
	f.IntVar(&threads, "threads", 0, "worker threads when the model runs in this process (0: all cores)")
	f.IntVar(&ctxLen, "ctx", 0, fmt.Sprintf("context length when the model runs in this process (0: the model's, at most %d)", model.DefaultContext))
	f.StringVar(&speculate, "speculate", "off", "when the model runs in this process, guess tokens ahead: off, ngram, or draft:PATH (same answers, faster where guesses are right)")
	gf.add(f)
	return cmd
}

func looksLikePath(s string) bool {
	return strings.HasSuffix(s, ".gguf") || strings.ContainsRune(s, filepath.Separator) || strings.ContainsRune(s, '/')
}

// inProcessOptions tells startInProcess what to run.
type inProcessOptions struct {
	Model     string // path of a GGUF file
	Threads   int
	Context   int
	Speculate string // the engine's speculation source
	Draft     string // the draft model's path, for Speculate "draft"
	GPU       string // the engine's device (--gpu)
	GPULayers int
}

// inProcessNode is a node chat started in this process.
type inProcessNode struct {
	URL   string // base URL of its API
	Model string // the model name it serves
	Stop  func() // shuts it down
}

// startInProcess starts a node in this process when none answers at the
// API URL: one model through the single-node engine. It does not join a
// cluster (run `strata node` for that); tests replace it.
var startInProcess = startLocalEngine

// startLocalEngine opens opts.Model with the single-node engine and serves
// it on a loopback port.
func startLocalEngine(ctx context.Context, opts inProcessOptions) (*inProcessNode, error) {
	if opts.Model == "" {
		return nil, errors.New("start a node (strata node), or give --model PATH to run a GGUF model here")
	}
	if _, err := os.Stat(opts.Model); err != nil {
		return nil, fmt.Errorf("--model %s is not a model file here: %w", opts.Model, err)
	}
	e, err := engine.Open(opts.Model, engine.Options{Threads: opts.Threads, Context: opts.Context, Speculate: opts.Speculate, Draft: opts.Draft,
		GPU: opts.GPU, GPULayers: opts.GPULayers})
	if err != nil {
		return nil, err
	}
	local, err := api.NewLocal(e, "")
	if err != nil {
		e.Close()
		return nil, err
	}
	srv, err := api.NewServer(api.Config{Addr: "127.0.0.1:0", Generator: local, Models: local})
	if err != nil {
		e.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { srv.Serve(sctx, ln); close(done) }()
	return &inProcessNode{URL: "http://" + ln.Addr().String(), Model: local.List()[0].ID, Stop: func() {
		cancel()
		<-done
		e.Close()
	}}, nil
}

// lineReader is the prompt's input: a line editor on a terminal, plain
// lines otherwise.
type lineReader interface {
	// Readline returns the next line without its end, readline.ErrInterrupt
	// for Ctrl-C at the prompt, or io.EOF.
	Readline() (string, error)
	SetPrompt(p string)
	// Pasted reports whether the line just read was followed at once by
	// more pasted input (so it does not end the message).
	Pasted() bool
}

const (
	promptFirst = ">>> "
	promptMore  = "... "
)

// newLineReader uses readline when in is a terminal.
func newLineReader(in io.Reader, out io.Writer) (lineReader, func(), error) {
	f, ok := in.(*os.File)
	if !ok || !readline.IsTerminal(int(f.Fd())) {
		return &plainReader{sc: bufio.NewScanner(in)}, func() {}, nil
	}
	pr := &pasteReader{r: readline.NewCancelableStdin(f)}
	cfg := &readline.Config{Prompt: promptFirst, Stdin: pr, Stdout: out, InterruptPrompt: "^C", EOFPrompt: "/exit"}
	if home, err := os.UserHomeDir(); err == nil {
		cfg.HistoryFile = filepath.Join(home, ".strata_history")
	}
	rl, err := readline.NewEx(cfg)
	if err != nil {
		return nil, nil, err
	}
	return &terminalReader{rl: rl, paste: pr}, func() { rl.Close() }, nil
}

// plainReader reads lines from a pipe or file.
type plainReader struct{ sc *bufio.Scanner }

func (p *plainReader) Readline() (string, error) {
	if p.sc.Scan() {
		return p.sc.Text(), nil
	}
	if err := p.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}
func (p *plainReader) SetPrompt(string) {}
func (p *plainReader) Pasted() bool     { return false }

// terminalReader is readline with paste detection.
type terminalReader struct {
	rl     *readline.Instance
	paste  *pasteReader
	pasted bool
}

func (t *terminalReader) Readline() (string, error) {
	for {
		line, err := t.rl.Readline()
		if err != nil {
			return line, err
		}
		end := t.paste.next()
		if end.crlf && line == "" { // the "\n" of a pasted "\r\n"
			continue
		}
		t.pasted = end.pasted
		return line, nil
	}
}
func (t *terminalReader) SetPrompt(p string) { t.rl.SetPrompt(p) }
func (t *terminalReader) Pasted() bool       { return t.pasted }

// pasteReader sits under the line editor and notes, for every line end
// it passes on, whether more input came in the same read: a typed Enter
// arrives alone, while pasted text arrives in one piece, so a line end
// followed by more bytes of the same read is inside a paste. (A paste
// split across reads may end a message early; """ blocks always work.)
type pasteReader struct {
	r     io.ReadCloser
	mu    sync.Mutex
	ends  []lineEnd // line ends passed on and not yet consumed, in order
	lastR bool      // the previous byte was '\r'
}

// lineEnd is one '\r' or '\n' the line editor will return a line for.
type lineEnd struct {
	pasted bool // more text followed it in the same read
	crlf   bool // a '\n' right after a '\r': the editor returns an empty line to skip
}

func (p *pasteReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.mu.Lock()
	for i, c := range b[:n] {
		switch {
		case c == '\n' && p.lastR:
			p.ends = append(p.ends, lineEnd{crlf: true})
		case c == '\r' || c == '\n':
			rest := n - 1 - i
			if c == '\r' && rest > 0 && b[i+1] == '\n' {
				rest-- // "\r\n" is one line end
			}
			p.ends = append(p.ends, lineEnd{pasted: rest > 0})
		}
		p.lastR = c == '\r'
	}
	p.mu.Unlock()
	return n, err
}

func (p *pasteReader) Close() error { return p.r.Close() }

// next consumes the line end the editor just returned a line for.
func (p *pasteReader) next() lineEnd {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ends) == 0 {
		return lineEnd{}
	}
	e := p.ends[0]
	p.ends = p.ends[1:]
	return e
}

// chatSession is the prompt loop: it reads messages and commands and
// streams answers. It holds the conversation.
type chatSession struct {
	client     *chatClient
	in         lineReader
	out        io.Writer
	model      string
	models     []string
	system     string
	temp       float64
	maxTokens  int
	interrupts <-chan struct{} // one value per Ctrl-C while an answer streams
	history    []chatMessage
	last       *answerStats
	total      answerStats
	answers    int
}

// answerStats describes one answer.
type answerStats struct {
	PromptTokens, CompletionTokens int
	FirstToken, Total              time.Duration
	Finish                         string
}

func (s *chatSession) printf(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

// run reads until EOF or /exit.
func (s *chatSession) run(ctx context.Context) error {
	s.printf("chatting with %s via %s; /help lists commands, Ctrl-D leaves\n", s.model, s.client.base)
	for {
		msg, err := s.readMessage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(msg) == "" {
			continue
		}
		if strings.HasPrefix(msg, "/") && !strings.Contains(msg, "\n") {
			if quit := s.command(ctx, msg); quit {
				return nil
			}
			continue
		}
		s.ask(ctx, msg)
		if err := ctx.Err(); err != nil {
			return nil
		}
	}
}

// readMessage reads one message: a line, several pasted lines, a """
// block, or lines continued with a trailing backslash. Ctrl-C at the
// prompt drops what was typed.
func (s *chatSession) readMessage() (string, error) {
	var lines []string
	block := false
	s.in.SetPrompt(promptFirst)
	for {
		line, err := s.in.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			lines, block = nil, false
			s.in.SetPrompt(promptFirst)
			continue
		}
		if err != nil {
			if err == io.EOF && len(lines) > 0 {
				return strings.Join(lines, "\n"), nil
			}
			return "", err
		}
		pasted := s.in.Pasted()
		switch {
		case block:
			if rest, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `"""`); ok {
				if rest != "" {
					lines = append(lines, rest)
				}
				return strings.Join(lines, "\n"), nil
			}
			lines = append(lines, line)
		case len(lines) == 0 && strings.HasPrefix(strings.TrimSpace(line), `"""`):
			rest := strings.TrimPrefix(strings.TrimSpace(line), `"""`)
			if inner, ok := strings.CutSuffix(rest, `"""`); ok && rest != "" {
				return inner, nil
			}
			block = true
			if rest != "" {
				lines = append(lines, rest)
			}
		case strings.HasSuffix(line, `\`):
			lines = append(lines, strings.TrimSuffix(line, `\`))
		case pasted:
			lines = append(lines, line)
		default:
			return strings.Join(append(lines, line), "\n"), nil
		}
		s.in.SetPrompt(promptMore)
	}
}

// command runs a /command; it reports whether to leave.
func (s *chatSession) command(ctx context.Context, line string) bool {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/exit", "/quit", "/bye":
		return true
	case "/help", "/?":
		s.printf(`/model [NAME]   list the models, or switch to NAME
/temp [T]       show or set the temperature (0 = greedy, up to 2)
/system [TEXT]  show or set the system prompt
/clear          forget the conversation
/stats          timings of the last answer and of this session
/exit           leave (or Ctrl-D)
A message of several lines: paste it, end lines with \, or put it between lines of """.
Ctrl-C stops an answer.
`)
	case "/model":
		if list, err := s.client.models(ctx); err == nil {
			s.models = list
		}
		if arg == "" {
			for _, m := range s.models {
				mark := "  "
				if m == s.model {
					mark = "* "
				}
				s.printf("%s%s\n", mark, m)
			}
			return false
		}
		for _, m := range s.models {
			if m == arg {
				s.model = arg
				s.printf("model: %s\n", arg)
				return false
			}
		}
		s.printf("no model %q here; /model lists them\n", arg)
	case "/temp", "/temperature":
		if arg == "" {
			s.printf("temperature: %g\n", s.temp)
			return false
		}
		t, err := strconv.ParseFloat(arg, 64)
		if err != nil || t < 0 || t > 2 {
			s.printf("the temperature is a number from 0 (greedy) to 2\n")
			return false
		}
		s.temp = t
		s.printf("temperature: %g\n", t)
	case "/system":
		if arg == "" {
			s.printf("system prompt: %q\n", s.system)
			return false
		}
		s.system = arg
		s.printf("system prompt set\n")
	case "/clear":
		s.history = nil
		s.printf("conversation cleared\n")
	case "/stats":
		if s.last == nil {
			s.printf("no answer yet\n")
			return false
		}
		l := s.last
		s.printf("last answer: %d prompt tokens, %d tokens generated, first token after %v, %.1f tokens/s, finish: %s\n",
			l.PromptTokens, l.CompletionTokens, l.FirstToken.Round(time.Millisecond), decodeRate(*l), l.Finish)
		s.printf("this session: answers %d, %d tokens generated in %v\n", s.answers, s.total.CompletionTokens, s.total.Total.Round(time.Millisecond))
	default:
		s.printf("unknown command %s; /help lists them\n", name)
	}
	return false
}

// decodeRate is tokens/s after the first token.
func decodeRate(a answerStats) float64 {
	d := a.Total - a.FirstToken
	if a.CompletionTokens <= 1 || d <= 0 {
		return 0
	}
	return float64(a.CompletionTokens-1) / d.Seconds()
}

// ask sends the conversation plus text and streams the answer. Ctrl-C
// stops the answer; what arrived stays in the conversation.
func (s *chatSession) ask(ctx context.Context, text string) {
	for len(s.interrupts) > 0 { // a Ctrl-C from before this answer does not count
		<-s.interrupts
	}
	msgs := make([]chatMessage, 0, len(s.history)+2)
	if s.system != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: s.system})
	}
	msgs = append(append(msgs, s.history...), chatMessage{Role: "user", Content: text})
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-s.interrupts:
			close(stopped)
			cancel()
		case <-actx.Done():
		}
	}()
	var answer strings.Builder
	st, err := s.client.chat(actx, chatRequest{Model: s.model, Messages: msgs, Temperature: s.temp, MaxTokens: s.maxTokens}, func(piece string) {
		answer.WriteString(piece)
		io.WriteString(s.out, piece)
	})
	s.printf("\n")
	select {
	case <-stopped:
		s.printf("(stopped)\n")
		st.Finish, err = "stopped", nil
	default:
	}
	if err != nil {
		if ctx.Err() == nil {
			s.printf("error: %v\n", err)
		}
		return
	}
	s.history = append(s.history, chatMessage{Role: "user", Content: text}, chatMessage{Role: "assistant", Content: answer.String()})
	s.last = &st
	s.answers++
	s.total.CompletionTokens += st.CompletionTokens
	s.total.Total += st.Total
}

// chatClient talks to a node's OpenAI-compatible API.
type chatClient struct {
	base string
	key  string
	http *http.Client
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string
	Messages    []chatMessage
	Temperature float64
	MaxTokens   int
}

// unreachableError is a node that did not answer at all (nothing listens).
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

func (c *chatClient) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			return nil, &unreachableError{err}
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// models lists the node's model names.
func (c *chatClient) models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list api.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s/v1/models: %w", c.base, err)
	}
	var names []string
	for _, m := range list.Data {
		names = append(names, m.ID)
	}
	return names, nil
}

// chat streams one answer, calling onText with each piece.
func (c *chatClient) chat(ctx context.Context, req chatRequest, onText func(string)) (st answerStats, err error) {
	start := time.Now()
	body := map[string]any{"model": req.Model, "messages": req.Messages, "temperature": req.Temperature, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}}
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	pieces := 0
	defer func() { // a stopped answer has no usage event: count what arrived
		if st.Total == 0 {
			st.Total = time.Since(start)
		}
		if st.CompletionTokens == 0 {
			st.CompletionTokens = pieces
		}
	}()
	resp, err := c.do(ctx, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			st.Total = time.Since(start)
			return st, nil
		}
		var ev struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Usage *api.Usage                `json:"usage"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return st, fmt.Errorf("bad event from the node: %w", err)
		}
		if ev.Error != nil {
			return st, errors.New(ev.Error.Message)
		}
		if ev.Usage != nil {
			st.PromptTokens, st.CompletionTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
		}
		for _, ch := range ev.Choices {
			if ch.Delta.Content != "" {
				if st.FirstToken == 0 {
					st.FirstToken = time.Since(start)
				}
				pieces++
				onText(ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				st.Finish = *ch.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	return st, errors.New("the node closed the stream before the end of the answer")
}
