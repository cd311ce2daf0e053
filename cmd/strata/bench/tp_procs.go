package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/spf13/cobra"

	"strata/internal/membw"
	"strata/peers"
	"strata/peers/allreduce"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

// The members of bench tp --procs are strata processes of their own
// (bench tp member), each with its own runtime, scheduler and garbage
// collector, as `strata node` processes are. The parent talks to each over
// its stdin and stdout, one JSON object a line:
//
//	parent: tpMemberInit          member: tpMemberHello (its node is up)
//	parent: tpMemberJoin          member: {} once the group has formed
//	parent: {} per decode         member: memberRun
//
// and closes stdin to stop it. Any failure is a line {"error": "..."}.
type tpMemberInit struct {
	Slice     model.TPSlice `json:"slice"`
	Secret    string        `json:"secret"`
	Transport string        `json:"transport"` // libp2p or shm
	Wire      string        `json:"wire"`
	Prompt    []int         `json:"prompt"`
	Gen       int           `json:"gen"`
	Threads   int           `json:"threads"`
}

type tpMemberHello struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

type tpMemberJoin struct {
	Group   string          `json:"group"`
	Members []tpMemberHello `json:"members"`
}

type tpMemberErr struct {
	Error string `json:"error"`
}

func benchTPMemberCmd() *cobra.Command {
	var modelPath string
	cmd := &cobra.Command{
		Use:    "member --model FILE",
		Short:  "internal: one member process of bench tp --procs",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := json.NewEncoder(cmd.OutOrStdout())
			if err := tpMember(cmd.Context(), modelPath, bufio.NewReader(cmd.InOrStdin()), out); err != nil {
				out.Encode(tpMemberErr{err.Error()})
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "path to the GGUF model")
	return cmd
}

// tpMember runs one member: it loads its slice, starts a node, joins the
// group and decodes whenever the parent asks.
func tpMember(ctx context.Context, modelPath string, in *bufio.Reader, out *json.Encoder) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var init tpMemberInit
	if err := readLine(in, &init); err != nil {
		return err
	}
	wire, err := allreduce.ParseWire(init.Wire)
	if err != nil {
		return err
	}
	f, err := gguf.Open(modelPath)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return err
	}
	m, err := model.LoadTP(f, 0, c.Layers, init.Slice)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nd, err := peers.New(ctx, peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Secret: []byte(init.Secret), Logger: quiet, Transport: peers.TransportTCP})
	if err != nil {
		return err
	}
	defer nd.Close()
	hello := tpMemberHello{ID: nd.ID().String()}
	for _, a := range nd.Host().Addrs() {
		hello.Addrs = append(hello.Addrs, a.String())
	}
	if err := out.Encode(hello); err != nil {
		return err
	}
	var join tpMemberJoin
	if err := readLine(in, &join); err != nil {
		return err
	}
	var id allreduce.GroupID
	b, err := hex.DecodeString(join.Group)
	if err != nil || len(b) != len(id) {
		return fmt.Errorf("group ID %q", join.Group)
	}
	copy(id[:], b)
	ids := make([]peer.ID, len(join.Members))
	for i, h := range join.Members {
		if ids[i], err = peer.Decode(h.ID); err != nil {
			return err
		}
		if ids[i] == nd.ID() {
			continue
		}
		for _, s := range h.Addrs {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return err
			}
			nd.Host().Peerstore().AddAddr(ids[i], a, peerstore.PermanentAddrTTL)
		}
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	g, err := nd.AllReduce().Join(jctx, id, ids, allreduce.Options{Wire: wire, Shm: init.Transport == "shm"})
	cancel()
	if err != nil {
		return err
	}
	defer g.Close()
	if err := out.Encode(struct{}{}); err != nil {
		return err
	}
	ar := &timedReducer{AllReducer: g}
	for {
		var go_ struct{}
		if err := readLine(in, &go_); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		cpu0 := membw.CPUTime()
		r, err := decodeMember(ctx, m, init.Threads, init.Prompt, init.Gen, ar)
		if err != nil {
			return err
		}
		r.CPU = int64(membw.CPUTime() - cpu0)
		if err := out.Encode(r); err != nil {
			return err
		}
	}
}

// readLine decodes one JSON line into v; io.EOF when the other side
// closed the pipe, the line's error when it holds one.
func readLine(in *bufio.Reader, v any) error {
	line, err := in.ReadBytes('\n')
	if err == io.EOF && len(bytes.TrimSpace(line)) == 0 {
		return io.EOF
	}
	if err != nil && err != io.EOF {
		return err
	}
	var e tpMemberErr
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s", e.Error)
	}
	return json.Unmarshal(line, v)
}

// procGroup is the parent's side of bench tp --procs.
type procGroup struct {
	cmds   []*exec.Cmd
	in     []io.WriteCloser
	out    []*bufio.Reader
	stderr []*bytes.Buffer
	gen    int
}

// startProcGroup starts one member process per slice, has each load its
// slice and start a node, and forms the group.
func startProcGroup(modelPath string, slices []model.TPSlice, threads int, prompt []int, gen int, transport string, wire allreduce.Wire) (*procGroup, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	pg := &procGroup{gen: gen}
	secret := string(peers.NewSecret())
	hellos := make([]tpMemberHello, len(slices))
	for _, s := range slices {
		cmd := exec.Command(self, "bench", "tp", "member", "--model", modelPath)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			pg.close()
			return nil, err
		}
		pg.cmds, pg.in, pg.out, pg.stderr = append(pg.cmds, cmd), append(pg.in, in), append(pg.out, bufio.NewReader(out)), append(pg.stderr, &stderr)
		if err := json.NewEncoder(in).Encode(tpMemberInit{Slice: s, Secret: secret, Transport: transport, Wire: wire.String(), Prompt: prompt, Gen: gen, Threads: threads}); err != nil {
			pg.close()
			return nil, err
		}
	}
	for i := range slices {
		if err := pg.read(i, &hellos[i]); err != nil {
			pg.close()
			return nil, err
		}
	}
	join := tpMemberJoin{Group: allreduce.NewGroupID().String(), Members: hellos}
	for i := range slices {
		if err := json.NewEncoder(pg.in[i]).Encode(join); err != nil {
			pg.close()
			return nil, err
		}
	}
	for i := range slices {
		var ok struct{}
		if err := pg.read(i, &ok); err != nil {
			pg.close()
			return nil, err
		}
	}
	return pg, nil
}

func (pg *procGroup) read(i int, v any) error {
	if err := readLine(pg.out[i], v); err != nil {
		if err == io.EOF {
			pg.cmds[i].Wait()
			err = fmt.Errorf("exited: %s", strings.TrimSpace(pg.stderr[i].String()))
		}
		return fmt.Errorf("member process %d: %w", i, err)
	}
	return nil
}

// decode has every member decode once, at the same time.
func (pg *procGroup) decode() (tpRun, error) {
	for _, in := range pg.in {
		if _, err := io.WriteString(in, "{}\n"); err != nil {
			return tpRun{}, err
		}
	}
	runs := make([]memberRun, len(pg.in))
	var cpu time.Duration
	for i := range runs {
		if err := pg.read(i, &runs[i]); err != nil {
			return tpRun{}, err
		}
		cpu += time.Duration(runs[i].CPU)
	}
	return groupRun(runs, pg.gen, cpu), nil
}

// close stops the members (end of input) and waits for them.
func (pg *procGroup) close() {
	for _, in := range pg.in {
		in.Close()
	}
	for _, cmd := range pg.cmds {
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}
