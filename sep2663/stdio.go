package sep2663

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
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// StdioTransport runs the upstream as a child process and speaks newline-delimited
// JSON-RPC on its stdin/stdout (2026-07-28 §Transports/stdio). It restarts the child with
// exponential backoff when it dies; calls in flight at that moment fail with
// ErrChildExited (the Client wraps it in *upstream.Error), and tasks that lived in the old
// child are found lost by the next tasks/get (-32602), which the bridge reports as an
// unknown outcome. Close shuts the child down the way the spec says: close stdin, wait,
// SIGTERM, wait, SIGKILL.
//
// Routing: a response goes to the call with its id; a notification that carries
// _meta["io.modelcontextprotocol/subscriptionId"] goes to the call (a subscriptions/listen)
// with that id; other notifications are dropped (progress is not used for tasks in
// 2026-07-28); a request from the server (forbidden in 2026-07-28) is answered -32601.
// When a call's ctx ends, the child gets notifications/cancelled for it: on stdio that is
// how a listen (or any request) is cancelled.
//
// Concurrency: safe for concurrent use. mu guards cur, up, pending and closed; each child's
// stdin writes are serialised by its own wmu. The supervisor goroutine is owned by the
// transport and waited for by Close.
type StdioTransport struct {
	o   StdioOptions
	log zerolog.Logger

	mu      sync.Mutex
	cur     *stdioChild              // the running child, nil while restarting
	up      chan struct{}            // closed while cur != nil; replaced when it dies
	pending map[string]*stdioPending // by the request id's raw JSON
	closed  bool
	starts  int

	stop chan struct{} // closed by Close: the supervisor stops restarting
	done chan struct{} // closed when the supervisor has returned
	once sync.Once
}

// StdioOptions configure a StdioTransport. Command is required.
type StdioOptions struct {
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
	// RestartMin and RestartMax bound the restart backoff (cenkalti/backoff/v5: doubling,
	// jittered ±20% within the bounds; reset when a child lived longer than RestartMax). Defaults 200 ms and 30 s.
	RestartMin, RestartMax time.Duration
	// MaxLineBytes caps one line from the child (default 64 MiB, as maxBody).
	MaxLineBytes int
}

// ErrChildExited fails calls that were in flight when the child process ended.
var ErrChildExited = errors.New("upstream child process exited")

// ErrTransportClosed fails calls after Close.
var ErrTransportClosed = errors.New("stdio transport closed")

// stdioChild is one run of the upstream process.
type stdioChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	wmu    sync.Mutex
	exited chan struct{} // closed after Wait returned and the reader finished
}

// stdioPending is one call waiting for its response.
type stdioPending struct {
	child *stdioChild
	reply chan *jsonrpc.Message // buffered 1
	notes chan *jsonrpc.Message // subscription notifications, drained by RoundTrip
	gone  chan struct{}         // closed when the child died before the reply
}

const stdioNoteBuffer = 256

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

// StartStdio starts the child process and the supervisor that restarts it. It fails only
// when the first start fails (the program cannot be run).
func StartStdio(o StdioOptions) (*StdioTransport, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("sep2663: StdioOptions.Command is empty")
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
		o.MaxLineBytes = maxBody
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	t := &StdioTransport{o: o, log: zerolog.Nop(), up: make(chan struct{}), pending: map[string]*stdioPending{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if o.Logger != nil {
		t.log = *o.Logger
	}
	ch, err := t.spawn()
	if err != nil {
		return nil, err
	}
	go t.supervise(ch)
	return t, nil
}

// Name implements Transport.
func (t *StdioTransport) Name() string { return "stdio:" + t.o.Command[0] }

// PID is the process id of the running child, 0 while it is being restarted.
func (t *StdioTransport) PID() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil {
		return 0
	}
	return t.cur.cmd.Process.Pid
}

// Starts counts the child processes started so far (1 before any restart).
func (t *StdioTransport) Starts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.starts
}

// spawn starts one child and its reader, and publishes it as cur.
func (t *StdioTransport) spawn() (*stdioChild, error) {
	cmd := exec.Command(t.o.Command[0], t.o.Command[1:]...)
	cmd.Dir = t.o.Dir
	cmd.Env = append(os.Environ(), t.o.Env...)
	cmd.Stderr = t.o.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sep2663: starting upstream %q: %w", t.o.Command[0], err)
	}
	ch := &stdioChild{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		t.read(ch, stdout)
	}()
	go func() {
		<-readerDone // all of stdout consumed before Wait closes the pipe
		_ = cmd.Wait()
		close(ch.exited)
	}()
	t.mu.Lock()
	t.cur = ch
	t.starts++
	close(t.up)
	t.mu.Unlock()
	t.log.Info().Int("pid", cmd.Process.Pid).Str("cmd", t.o.Command[0]).Msg("upstream child started")
	return ch, nil
}

// supervise waits for each child to exit and starts the next one after a backoff, until
// Close.
func (t *StdioTransport) supervise(ch *stdioChild) {
	defer close(t.done)
	bo := restartBackoff(t.o.RestartMin, t.o.RestartMax)
	for {
		started := time.Now()
		select {
		case <-ch.exited:
		case <-t.stop:
			t.shutdown(ch)
			t.down(ch)
			return
		}
		t.down(ch)
		t.log.Warn().Int("pid", ch.cmd.Process.Pid).Str("exit", ch.cmd.ProcessState.String()).Msg("upstream child exited; restarting")
		if time.Since(started) > t.o.RestartMax {
			bo.Reset()
		}
		for {
			select {
			case <-t.stop:
				return
			case <-time.After(jittered(bo, t.o.RestartMin, t.o.RestartMax)):
			}
			next, err := t.spawn()
			if err == nil {
				ch = next
				break
			}
			t.log.Error().Err(err).Msg("upstream child restart failed")
		}
	}
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

// down unpublishes a dead child and fails the calls waiting on it.
func (t *StdioTransport) down(ch *stdioChild) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == ch {
		t.cur = nil
		t.up = make(chan struct{})
	}
	for id, p := range t.pending {
		if p.child == ch {
			close(p.gone)
			delete(t.pending, id)
		}
	}
}

// shutdown stops a child as the spec says: close stdin, wait, SIGTERM, wait, SIGKILL.
func (t *StdioTransport) shutdown(ch *stdioChild) {
	ch.wmu.Lock()
	_ = ch.stdin.Close()
	ch.wmu.Unlock()
	select {
	case <-ch.exited:
		return
	case <-time.After(t.o.CloseWait):
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.exited:
		return
	case <-time.After(t.o.TermWait):
	}
	t.log.Warn().Int("pid", ch.cmd.Process.Pid).Msg("upstream child ignored SIGTERM; killing it")
	_ = ch.cmd.Process.Kill()
	<-ch.exited
}

// Close stops restarting and shuts the child down; it returns when the child has exited
// or ctx ended. Calls in flight fail. Safe to call more than once.
func (t *StdioTransport) Close(ctx context.Context) error {
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		close(t.stop)
	})
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// child waits for a running child; it fails when ctx ends or the transport is closed.
func (t *StdioTransport) child(ctx context.Context) (*stdioChild, error) {
	for {
		t.mu.Lock()
		cur, up, closed := t.cur, t.up, t.closed
		t.mu.Unlock()
		if closed {
			return nil, ErrTransportClosed
		}
		if cur != nil {
			return cur, nil
		}
		select {
		case <-up:
		case <-t.stop:
			return nil, ErrTransportClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// write sends one line to the child.
func (ch *stdioChild) write(b []byte) error {
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	_, err := ch.stdin.Write(line)
	return err
}

// RoundTrip implements Transport.
func (t *StdioTransport) RoundTrip(ctx context.Context, id jsonrpc.ID, body []byte, onMessage func(*jsonrpc.Message)) (json.RawMessage, *jsonrpc.Error, error) {
	ch, err := t.child(ctx)
	if err != nil {
		return nil, nil, err
	}
	p := &stdioPending{child: ch, reply: make(chan *jsonrpc.Message, 1), notes: make(chan *jsonrpc.Message, stdioNoteBuffer), gone: make(chan struct{})}
	key := id.Raw()
	t.mu.Lock()
	if t.cur != ch {
		t.mu.Unlock()
		return nil, nil, ErrChildExited
	}
	t.pending[key] = p
	t.mu.Unlock()
	forget := func() {
		t.mu.Lock()
		if t.pending[key] == p {
			delete(t.pending, key)
		}
		t.mu.Unlock()
	}
	if err := ch.write(body); err != nil {
		forget()
		return nil, nil, fmt.Errorf("%w: %v", ErrChildExited, err)
	}
	for {
		select {
		case m := <-p.reply:
			t.drain(p, onMessage)
			if m.Error != nil {
				return nil, m.Error, nil
			}
			return m.Result, nil, nil
		case n := <-p.notes:
			if onMessage != nil {
				onMessage(n)
			}
		case <-p.gone:
			return nil, nil, ErrChildExited
		case <-ctx.Done():
			forget()
			t.cancelRequest(ch, id)
			return nil, nil, ctx.Err()
		}
	}
}

// drain delivers notifications that arrived before the response.
func (t *StdioTransport) drain(p *stdioPending, onMessage func(*jsonrpc.Message)) {
	for {
		select {
		case n := <-p.notes:
			if onMessage != nil {
				onMessage(n)
			}
		default:
			return
		}
	}
}

// cancelRequest tells the child a request was abandoned (the only way on stdio).
func (t *StdioTransport) cancelRequest(ch *stdioChild, id jsonrpc.ID) {
	b := frame("", "notifications/cancelled", []byte(`{"requestId":`+id.Raw()+`,"reason":"request abandoned by taskbridge"}`))
	_ = ch.write(b)
}

// Send implements Transport.
func (t *StdioTransport) Send(ctx context.Context, body []byte) error {
	ch, err := t.child(ctx)
	if err != nil {
		return err
	}
	return ch.write(body)
}

// read consumes the child's stdout until it closes. Lines that are not JSON-RPC are
// logged by size and skipped: stdout must carry only MCP messages, but one stray line must
// not take the upstream down.
func (t *StdioTransport) read(ch *stdioChild, stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(br, t.o.MaxLineBytes)
		if len(bytes.TrimSpace(line)) > 0 {
			t.dispatch(ch, line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.log.Warn().Err(err).Msg("upstream child stdout unreadable; stopping it")
				_ = ch.cmd.Process.Kill()
				_, _ = io.Copy(io.Discard, br)
			}
			return
		}
	}
}

// dispatch routes one message from the child.
func (t *StdioTransport) dispatch(ch *stdioChild, line []byte) {
	m, err := jsonrpc.Decode(line)
	if err != nil {
		t.log.Warn().Int("bytes", len(line)).Msg("upstream child wrote a line that is not JSON-RPC; skipped")
		return
	}
	switch {
	case m.IsResponse():
		t.mu.Lock()
		p := t.pending[m.ID.Raw()]
		if p != nil {
			delete(t.pending, m.ID.Raw())
		}
		t.mu.Unlock()
		if p != nil {
			p.reply <- m
		}
	case m.IsNotification():
		sub := gjson.GetBytes(m.Params, `_meta.io\.modelcontextprotocol/subscriptionId`)
		if !sub.Exists() {
			return
		}
		key := sub.Raw
		t.mu.Lock()
		p := t.pending[key]
		if p == nil && sub.Type == gjson.String {
			p = t.pending[sub.Str] // a numeric id echoed as a string
		}
		t.mu.Unlock()
		if p == nil {
			return
		}
		select {
		case p.notes <- m:
		default:
			t.log.Warn().Str("subscription", key).Msg("subscription notification dropped: consumer too slow")
		}
	default:
		b, _ := jsonrpc.Encode(jsonrpc.NewErrorResponse(m.ID,
			jsonrpc.ErrMethodNotFound.Wrapf("a 2026-07-28 server sends no requests: %s", m.Method)))
		_ = ch.write(b)
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
