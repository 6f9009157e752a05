package hop

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// host is the connection pool of one upstream (scheme and host:port).
//
// Concurrency: key, addr, tls, proxied and slots are set by newHost and never written
// again; mu guards idle, timer and closed connections' bookkeeping.
type host struct {
	t       *Transport
	key     hostKey
	addr    string      // host:port to dial
	tls     *tls.Config // nil for http
	proxied bool        // served by the proxy transport (Options.Proxy)
	slots   chan struct{}

	mu    sync.Mutex
	idle  []*conn     // LIFO: the most recently used connection is reused first
	timer *time.Timer // expires idle connections; nil when none is idle
}

// conn is one upstream connection. It is used by one exchange at a time: whoever holds it
// out of the pool owns every field.
type conn struct {
	h        *host
	nc       net.Conn
	idleAt   time.Time // when it went back to the pool
	reused   bool      // served an exchange before this one
	deadline bool      // nc has a deadline set
	written  int       // bytes written in the current exchange
}

// Write counts what reaches the connection, so a failed write can tell "nothing sent".
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.nc.Write(p)
	c.written += n
	return n, err
}

// setDeadline makes d (zero: none) the connection's deadline for the coming exchange.
func (c *conn) setDeadline(d time.Time) {
	if d.IsZero() && !c.deadline {
		return
	}
	_ = c.nc.SetDeadline(d)
	c.deadline = !d.IsZero()
}

func (c *conn) close() { _ = c.nc.Close() }

// acquireSlot waits for one of MaxConnsPerHost (when set), or for ctx.
func (h *host) acquireSlot(ctx context.Context) error {
	if h.slots == nil {
		return nil
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *host) releaseSlot() {
	if h.slots != nil {
		<-h.slots
	}
}

// get returns an idle connection that is still open, or a new one. Its deadline is ctx's.
func (h *host) get(ctx context.Context) (*conn, error) {
	d, _ := ctx.Deadline()
	for {
		c := h.popIdle()
		if c == nil {
			break
		}
		c.setDeadline(d)
		if time.Since(c.idleAt) < h.t.o.IdleConnTimeout && alive(c.nc) {
			c.reused = true
			return c, nil
		}
		c.close()
	}
	c, err := h.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.setDeadline(d)
	return c, nil
}

// fresh returns a new connection (the retry after a write that sent nothing).
func (h *host) fresh(ctx context.Context) (*conn, error) {
	c, err := h.dial(ctx)
	if err != nil {
		return nil, err
	}
	d, _ := ctx.Deadline()
	c.setDeadline(d)
	return c, nil
}

func (h *host) popIdle() *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.idle)
	if n == 0 {
		return nil
	}
	c := h.idle[n-1]
	h.idle[n-1] = nil
	h.idle = h.idle[:n-1]
	return c
}

// dial connects (and for https, handshakes) within ctx and the dial and handshake timeouts.
func (h *host) dial(ctx context.Context) (*conn, error) {
	d := net.Dialer{Timeout: h.t.o.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return nil, err
	}
	if h.tls != nil {
		tc := tls.Client(nc, h.tls)
		hctx, cancel := context.WithTimeout(ctx, h.t.o.TLSHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	return &conn{h: h, nc: nc}, nil
}

// put returns a connection whose exchange ended cleanly to the pool (or closes it when the
// pool is full).
func (h *host) put(c *conn) {
	c.idleAt = time.Now()
	h.mu.Lock()
	if len(h.idle) >= h.t.o.MaxIdleConnsPerHost {
		h.mu.Unlock()
		c.close()
		return
	}
	h.idle = append(h.idle, c)
	if h.timer == nil {
		h.timer = time.AfterFunc(h.t.o.IdleConnTimeout, h.expire)
	}
	h.mu.Unlock()
}

// expire closes the connections idle for IdleConnTimeout and re-arms for the next one.
// It runs on the timer's goroutine, which exists only while it runs.
func (h *host) expire() {
	now := time.Now()
	h.mu.Lock()
	n := 0
	for n < len(h.idle) && now.Sub(h.idle[n].idleAt) >= h.t.o.IdleConnTimeout {
		n++
	}
	old := make([]*conn, n)
	copy(old, h.idle[:n])
	rest := copy(h.idle, h.idle[n:])
	clear(h.idle[rest:])
	h.idle = h.idle[:rest]
	h.timer = nil
	if rest > 0 {
		h.timer = time.AfterFunc(h.t.o.IdleConnTimeout-now.Sub(h.idle[0].idleAt), h.expire)
	}
	h.mu.Unlock()
	for _, c := range old {
		c.close()
	}
}

// closeIdle closes every idle connection now.
func (h *host) closeIdle() {
	h.mu.Lock()
	old := h.idle
	h.idle = nil
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.mu.Unlock()
	for _, c := range old {
		c.close()
	}
}

// Buffers are pooled per exchange, not kept per connection: idle connections hold none.
var (
	writers sync.Pool // *bufio.Writer
	readers sync.Pool // *bufio.Reader
)

func getWriter(c *conn) *bufio.Writer {
	if bw, ok := writers.Get().(*bufio.Writer); ok {
		bw.Reset(c)
		return bw
	}
	return bufio.NewWriterSize(c, 8<<10)
}

func putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}

// getReader returns a reader over nc whose buffer holds MaxResponseHeaderBytes: fasthttp
// needs the whole response header in the buffer, and fails an exchange whose header does
// not fit.
func getReader(nc net.Conn, size int) *bufio.Reader {
	if br, ok := readers.Get().(*bufio.Reader); ok && br.Size() == size {
		br.Reset(nc)
		return br
	}
	return bufio.NewReaderSize(nc, size)
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}
