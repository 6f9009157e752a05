// Package child runs an MCP server as a child process that speaks newline-delimited
// JSON-RPC on its stdin and stdout (the stdio transport of both MCP revisions), for the
// upstream clients of both faces: sep2663's StdioTransport and legacy's stdio sessions
// are thin adapters over one Proc, so a dual-era child is reached by both clients at once
// over the one process.
//
// What a Proc owns:
//
//   - the process: started at once, restarted with exponential backoff and jitter
//     (github.com/cenkalti/backoff/v5) when it dies; each run has a generation number, so
//     a client can tell that a session opened with an earlier run is gone;
//   - the shutdown sequence the spec prescribes: close stdin, wait, SIGTERM, wait, SIGKILL;
//   - the wire ids: every request gets a Proc-wide id, so clients that number their
//     requests independently (one legacy session per caller, the stateless 2026-07-28
//     client) never collide on the one pipe;
//   - routing of what the child writes (route.go): a response to its call; a notification
//     or server request to the call it belongs to (a listen's subscriptionId, a related
//     task, a progress token, or the one request in flight that can ask), else to the
//     unsolicited handler (stdio's equivalent of the standalone GET stream).
//
// Concurrency: safe for concurrent use. mu guards cur, up, pending, closed and starts;
// each run's stdin writes are serialised by its own wmu. The supervisor goroutine is
// owned by the Proc and waited for by Close.
package child

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Options configure a Proc. Command is required.
type Options struct {
	Command []string // argv: program and arguments (see SplitCommand)
	Env     []string // added to the bridge's environment, "KEY=value"
	Dir     string   // working directory; "" is the bridge's
	// Stderr receives the child's stderr (default os.Stderr: with "taskbridge stdio" that is
	// the log stream, never the protocol stream).
	Stderr io.Writer
	Logger *zerolog.Logger

	// CloseWait is how long Close waits for the child to exit after closing its stdin,
	// TermWait how long after SIGTERM before SIGKILL. Defaults 5 s and 5 s.
	CloseWait, TermWait time.Duration
	// RestartMin and RestartMax bound the restart backoff (doubling, with ±20 % jitter;
	// reset when a child lived longer than RestartMax). Defaults 200 ms and 30 s.
	RestartMin, RestartMax time.Duration
	// MaxLineBytes caps one line from the child (default 64 MiB).
	MaxLineBytes int
	// OnCall, when set, is told of every Call once it ended: its method, how long it took
	// and its error (nil on a result). Both faces' clients over one child call through here,
	// so it counts the child's requests of either era (taskbridge verify's upstream counts).
	OnCall func(method string, d time.Duration, err error)
}

// ErrExited fails calls that were in flight when the child process ended.
var ErrExited = errors.New("upstream child process exited")

// ErrClosed fails calls after Close.
var ErrClosed = errors.New("stdio transport closed")

// errTooLarge is a line from the child above MaxLineBytes.
var errTooLarge = errors.New("upstream child wrote a line above the size limit")

// Proc is one upstream child process and its restarts.
type Proc struct {
	o   Options
	log zerolog.Logger

	mu      sync.Mutex
	cur     *run             // the running child, nil while restarting
	up      chan struct{}    // closed while cur != nil; replaced when it dies
	pending map[string]*call // by the wire id's raw JSON
	closed  bool
	starts  int

	nextID      atomic.Int64
	unsolicited atomic.Pointer[func(*jsonrpc.Message)]

	stop chan struct{} // closed by Close: the supervisor stops restarting
	done chan struct{} // closed when the supervisor has returned
	once sync.Once
}

// run is one run of the child process.
type run struct {
	cmd    *exec.Cmd
	gen    uint64
	stdin  io.WriteCloser
	wmu    sync.Mutex
	exited chan struct{} // closed after Wait returned and the reader finished
}

// Start starts the child process and the supervisor that restarts it. It fails only when
// the first start fails (the program cannot be run).
func Start(o Options) (*Proc, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("child: Options.Command is empty")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.CloseWait, 5*time.Second)
	def(&o.TermWait, 5*time.Second)
	def(&o.RestartMin, 200*time.Millisecond)
	def(&o.RestartMax, 30*time.Second)
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = 64 << 20
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	p := &Proc{o: o, log: zerolog.Nop(), up: make(chan struct{}), pending: map[string]*call{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if o.Logger != nil {
		p.log = *o.Logger
	}
	r, err := p.spawn()
	if err != nil {
		return nil, err
	}
	go p.supervise(r)
	return p, nil
}

// Name names the upstream in errors and logs ("stdio:PROGRAM").
func (p *Proc) Name() string { return "stdio:" + p.o.Command[0] }

// PID is the process id of the running child, 0 while it is being restarted.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.cmd.Process.Pid
}

// Starts counts the child processes started so far (1 before any restart).
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Generation is the number of the running child (1 for the first; 0 while none runs). A
// session opened with one generation does not exist in the next.
func (p *Proc) Generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.gen
}

// SetUnsolicited sets the handler of what the child writes outside any call (see route.go).
// It runs on the reader goroutine and must not block; without one, server requests are
// answered -32601 and notifications dropped.
func (p *Proc) SetUnsolicited(h func(*jsonrpc.Message)) { p.unsolicited.Store(&h) }

// spawn starts one child and its reader, and publishes it as cur.
func (p *Proc) spawn() (*run, error) {
	cmd := exec.Command(p.o.Command[0], p.o.Command[1:]...)
	cmd.Dir = p.o.Dir
	cmd.Env = append(os.Environ(), p.o.Env...)
	cmd.Stderr = p.o.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("child: starting upstream %q: %w", p.o.Command[0], err)
	}
	p.mu.Lock()
	p.starts++
	r := &run{cmd: cmd, gen: uint64(p.starts), stdin: stdin, exited: make(chan struct{})}
	p.mu.Unlock()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		p.read(r, stdout)
	}()
	go func() {
		<-readerDone // all of stdout consumed before Wait closes the pipe
		_ = cmd.Wait()
		close(r.exited)
	}()
	p.mu.Lock()
	p.cur = r
	close(p.up)
	p.mu.Unlock()
	p.log.Info().Int("pid", cmd.Process.Pid).Str("cmd", p.o.Command[0]).Msg("upstream child started")
	return r, nil
}

// supervise waits for each child to exit and starts the next one after a backoff, until
// Close.
func (p *Proc) supervise(r *run) {
	defer close(p.done)
	bo := restartBackoff(p.o.RestartMin, p.o.RestartMax)
	for {
		started := time.Now()
		select {
		case <-r.exited:
		case <-p.stop:
			p.shutdown(r)
			p.down(r)
			return
		}
		p.down(r)
		p.log.Warn().Int("pid", r.cmd.Process.Pid).Str("exit", r.cmd.ProcessState.String()).Msg("upstream child exited; restarting")
		if time.Since(started) > p.o.RestartMax {
			bo.Reset()
		}
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(jittered(bo, p.o.RestartMin, p.o.RestartMax)):
			}
			next, err := p.spawn()
			if err == nil {
				r = next
				break
			}
			p.log.Error().Err(err).Msg("upstream child restart failed")
		}
	}
}

// down unpublishes a dead child and fails the calls waiting on it.
func (p *Proc) down(r *run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == r {
		p.cur = nil
		p.up = make(chan struct{})
	}
	for id, c := range p.pending {
		if c.run == r {
			close(c.gone)
			delete(p.pending, id)
		}
	}
}

// shutdown stops a child as the spec says: close stdin, wait, SIGTERM, wait, SIGKILL.
func (p *Proc) shutdown(r *run) {
	r.wmu.Lock()
	_ = r.stdin.Close()
	r.wmu.Unlock()
	select {
	case <-r.exited:
		return
	case <-time.After(p.o.CloseWait):
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
		return
	case <-time.After(p.o.TermWait):
	}
	p.log.Warn().Int("pid", r.cmd.Process.Pid).Msg("upstream child ignored SIGTERM; killing it")
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// Close stops restarting and shuts the child down; it returns when the child has exited
// or ctx ended. Calls in flight fail. Safe to call more than once.
func (p *Proc) Close(ctx context.Context) error {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.stop)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// running waits for a running child; it fails when ctx ends or the Proc is closed.
func (p *Proc) running(ctx context.Context) (*run, error) {
	for {
		p.mu.Lock()
		cur, up, closed := p.cur, p.up, p.closed
		p.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if cur != nil {
			return cur, nil
		}
		select {
		case <-up:
		case <-p.stop:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// write sends one line to the child.
func (r *run) write(b []byte) error {
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, err := r.stdin.Write(line)
	return err
}

// Notify writes a notification (params may be nil).
func (p *Proc) Notify(ctx context.Context, method string, params json.RawMessage) error {
	r, err := p.running(ctx)
	if err != nil {
		return err
	}
	return r.write(Frame("", method, params))
}

// Reply writes the answer to a server request to the running child (a child restarted in
// between gets an answer to an id it never sent, which it ignores).
func (p *Proc) Reply(ctx context.Context, m *jsonrpc.Message) error {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		return err
	}
	r, err := p.running(ctx)
	if err != nil {
		return err
	}
	return r.write(b)
}

// read consumes the child's stdout until it closes. Lines that are not JSON-RPC are
// logged by size and skipped: stdout must carry only MCP messages, but one stray line must
// not take the upstream down.
func (p *Proc) read(r *run, stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(br, p.o.MaxLineBytes)
		if len(bytes.TrimSpace(line)) > 0 {
			p.dispatch(r, line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.log.Warn().Err(err).Msg("upstream child stdout unreadable; stopping it")
				_ = r.cmd.Process.Kill()
				_, _ = io.Copy(io.Discard, br)
			}
			return
		}
	}
}

// readLine returns the next line without its line ending ("\n" or "\r\n"), failing when it
// exceeds limit bytes. At the end of input it returns the last partial line with io.EOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit+2 {
			return nil, errTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return line, err
		}
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}

// Frame builds a JSON-RPC message by hand, so params go out byte for byte (json.Marshal
// would compact them and escape HTML characters). rawID "" makes a notification; nil
// params are left out.
func Frame(rawID, method string, params []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(params) + len(method) + 64)
	b.WriteString(`{"jsonrpc":"2.0",`)
	if rawID != "" {
		b.WriteString(`"id":`)
		b.WriteString(rawID)
		b.WriteByte(',')
	}
	b.WriteString(`"method":`)
	b.Write(jsonobj.Quote(method))
	if len(bytes.TrimSpace(params)) > 0 {
		b.WriteString(`,"params":`)
		b.Write(params)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// SplitCommand splits "CMD ARGS" on spaces and tabs, keeping 'single' or "double" quoted
// parts together (no escapes, no variables: it is not a shell).
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if in {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}

// restartBackoff is the child restarts' backoff (cenkalti/backoff/v5): doubling from lo
// to hi, each wait jittered by ±20% so a fleet of bridges does not restart its children in
// step.
func restartBackoff(lo, hi time.Duration) *backoff.ExponentialBackOff {
	bo := &backoff.ExponentialBackOff{InitialInterval: lo, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: hi}
	bo.Reset()
	return bo
}

// jittered is bo's next wait, kept within [lo, hi] (the jitter never breaks the limits).
func jittered(bo backoff.BackOff, lo, hi time.Duration) time.Duration {
	return min(max(bo.NextBackOff(), lo), hi)
}
