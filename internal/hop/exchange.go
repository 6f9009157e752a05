package hop

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// An exchange is in one of three states; the transitions out of active happen once, so a
// late cancellation can never touch a connection that went back to the pool.
const (
	active      int32 = iota
	released          // the connection went back to the pool or was closed by its owner
	interrupted       // the context ended (or Close raced a Read): the connection is dead
)

// errReadOnClosed is what a Read after Close returns (net/http's wording).
var errReadOnClosed = errors.New("http: read on closed response body")

// aLongTimeAgo is the deadline that unblocks a connection's pending read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// body is one exchange from the moment the request is written: it owns the connection,
// the read buffer and the parsed response, and is the Response.Body that streams the rest
// of the response. Read and Close may run on different goroutines.
type body struct {
	c      *conn
	ctx    context.Context
	state  atomic.Int32
	stop   func() bool // unregisters the cancellation hook; false once it ran
	closed atomic.Bool

	mu     sync.Mutex // held by Read; guards everything below
	br     *bufio.Reader
	resp   *fasthttp.Response
	stream io.Reader // resp's body stream
	done   bool      // released: nothing below may be touched any more
	err    error     // a failed Read's error, returned again by later Reads
}

// interrupt is the cancellation hook: the first transition out of active moves the
// connection's deadline to the past, which fails any read or write in progress.
func (b *body) interrupt() {
	if b.state.CompareAndSwap(active, interrupted) {
		_ = b.c.nc.SetDeadline(aLongTimeAgo)
	}
}

// exchange writes freq on c and reads the response header. retry reports that nothing was
// sent on a reused connection, so the request may go again on a new one.
func (c *conn) exchange(ctx context.Context, freq *fasthttp.Request, req *http.Request) (resp *http.Response, retry bool, err error) {
	b := &body{c: c, ctx: ctx, stop: noStop}
	if ctx.Done() != nil {
		b.stop = context.AfterFunc(ctx, b.interrupt)
	}
	if err := ctx.Err(); err != nil { // ended before the hook was registered
		b.fail()
		return nil, false, err
	}
	c.written = 0
	bw := getWriter(c)
	err = freq.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	putWriter(bw)
	if err != nil {
		retry = c.reused && c.written == 0 && ctx.Err() == nil && !isTimeout(err)
		b.fail()
		return nil, retry, b.cause(err)
	}
	b.br = getReader(c.nc, c.h.t.o.MaxResponseHeaderBytes)
	b.resp = fasthttp.AcquireResponse()
	b.resp.Header.SetNoDefaultContentType(true)
	b.resp.StreamBody = true
	if req.Method == http.MethodHead {
		b.resp.SkipBody = true
	}
	if err := b.resp.ReadLimitBody(b.br, 0); err != nil {
		b.mu.Lock()
		b.release(false)
		b.mu.Unlock()
		if errors.Is(err, io.EOF) && c.written > 0 {
			err = io.ErrUnexpectedEOF // the upstream closed the connection without answering
		}
		return nil, false, b.cause(err)
	}
	b.stream = b.resp.BodyStream()
	var rc io.ReadCloser = b
	if b.stream == nil { // HEAD, 1xx, 204, 304: no body to wait for
		b.mu.Lock()
		b.finish(true)
		b.mu.Unlock()
		rc = http.NoBody
	}
	return toResponse(b.resp, req, rc), false, nil
}

// noStop is the hook remover of a context that never ends.
func noStop() bool { return true }

// fail ends an exchange that never got as far as a response: the connection is closed.
func (b *body) fail() {
	b.stop()
	b.state.Store(interrupted)
	b.c.close()
	b.done = true
}

// cause is the error the caller sees: the context's when it ended (the deadline, a
// cancellation), else err.
func (b *body) cause(err error) error {
	if cerr := b.ctx.Err(); cerr != nil {
		return cerr
	}
	if _, has := b.ctx.Deadline(); has && isTimeout(err) {
		return context.DeadlineExceeded // the connection's deadline is the context's
	}
	return err
}

// Read implements io.Reader over the response body. At the end of the body the connection
// goes back to the pool at once (before Close), as with net/http.
func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errReadOnClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.err != nil:
		return 0, b.err
	case b.done:
		if b.closed.Load() {
			return 0, errReadOnClosed
		}
		return 0, io.EOF
	}
	n, err := b.stream.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		b.finish(true)
		err = io.EOF
	default:
		b.err = b.cause(err)
		err = b.err
		b.finish(false)
	}
	return n, err
}

// Close implements io.Closer. A body closed before its end closes the connection; a Read
// blocked on another goroutine is unblocked first.
func (b *body) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if !b.mu.TryLock() {
		b.interrupt() // a Read is in progress: fail it, then take over
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	b.finish(false)
	return nil
}

// finish is release once the response was handed out, when the body owns the exchange's
// connection slot too.
func (b *body) finish(reuse bool) {
	if !b.done {
		b.release(reuse)
		b.c.h.releaseSlot()
	}
}

// release ends the exchange (mu held): the parsed response and the read buffer go back to
// their pools, and the connection to the host's pool when reuse is true, the exchange was
// never interrupted, nothing is left unread in the buffer and neither side asked to close.
func (b *body) release(reuse bool) {
	if b.done {
		return
	}
	b.done = true
	stopped := b.stop()
	reuse = reuse && stopped && b.state.CompareAndSwap(active, released) &&
		b.br.Buffered() == 0 && !b.resp.ConnectionClose()
	putReader(b.br)
	fasthttp.ReleaseResponse(b.resp)
	b.br, b.resp, b.stream = nil, nil, nil
	if reuse {
		b.c.h.put(b.c)
	} else {
		b.state.Store(interrupted)
		b.c.close()
	}
}

// isTimeout reports a deadline error of a connection: a net.Error's, or fasthttp's
// ErrTimeout, which the header parser returns for any timeout and which has Timeout but
// not Temporary (so it is no net.Error). When the connection's deadline, which is the
// context's, fires before the context's own timer has marked it done, this is what tells
// the two apart from an upstream failure.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
