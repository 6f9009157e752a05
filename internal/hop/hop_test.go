package hop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a real HTTP server on loopback that counts the connections it accepted.
type upstream struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	state map[net.Conn]http.ConnState
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{state: map[net.Conn]http.ConnState{}}
	// net/http's server notices a client hanging up (and ends r.Context()) only once the
	// request body was read to the end: read it first, so every handler can wait on it.
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = io.NopCloser(bytes.NewReader(mustReadAll(r.Body)))
		h(w, r)
	}))
	u.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
		u.mu.Lock()
		u.state[c] = s
		u.mu.Unlock()
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// closed counts the server's connections that ended.
func (u *upstream) closed() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, s := range u.state {
		if s == http.StateClosed || s == http.StateHijacked {
			n++
		}
	}
	return n
}

func newTransport(t *testing.T, o Options) *Transport {
	t.Helper()
	if o.Proxy == nil {
		o.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	}
	tr := NewTransport(o)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func post(t *testing.T, c *http.Client, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header["MCP-Protocol-Version"] = []string{"2026-07-28"} // a name as the map holds it
	return c.Do(req)
}

// TestExchangeAndKeepAlive: a POST arrives with its body and headers as given, the answer
// comes back with its status and headers, and ten calls in a row share one connection.
func TestExchangeAndKeepAlive(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s-1")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		fmt.Fprintf(w, `{"got":%q,"pv":%q,"ua":%q,"cl":%d}`, b, r.Header.Get("Mcp-Protocol-Version"), r.UserAgent(), r.ContentLength)
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	for i := range 10 {
		resp, err := post(t, c, context.Background(), u.URL+"/mcp", fmt.Sprintf(`{"n":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"got":"{\"n\":%d}","pv":"2026-07-28","ua":"taskbridge","cl":7}`, i)
		if string(b) != want || resp.StatusCode != 200 || resp.Status != "200 OK" {
			t.Fatalf("answer %d: %s %s, want %s", i, resp.Status, b, want)
		}
		if resp.Header.Get("Mcp-Session-Id") != "s-1" || strings.Join(resp.Header.Values("X-Multi"), ",") != "a,b" ||
			resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != int64(len(want)) {
			t.Fatalf("headers: %v, length %d", resp.Header, resp.ContentLength)
		}
	}
	if n := u.conns.Load(); n != 1 {
		t.Fatalf("10 calls used %d connections, want 1 (keep-alive)", n)
	}
}

// TestStatusAndNoBody: a 202 without a body and an error status with one.
func TestStatusAndNoBody(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("s") == "404" {
			http.Error(w, "gone", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	resp, err := post(t, c, context.Background(), u.URL+"/mcp", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || len(b) != 0 || resp.Header.Get("Content-Type") != "" {
		t.Fatalf("202: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	resp, err = post(t, c, context.Background(), u.URL+"/mcp?s=404", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || string(b) != "gone\n" || resp.Status != "404 Not Found" {
		t.Fatalf("404: %s %q", resp.Status, b)
	}
}

// TestSSEStreamsEventByEvent: each event reaches the reader while the upstream still
// holds the response open, before the next one is written.
func TestSSEStreamsEventByEvent(t *testing.T) {
	next := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	resp, err := post(t, c, context.Background(), u.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{} // the upstream writes the next event only now
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the stream: %q %v", rest, err)
	}
}

// TestCancelWhileWaiting: a caller that gives up while the upstream has not answered gets
// ctx.Err() at once, and the upstream sees its connection end.
func TestCancelWhileWaiting(t *testing.T) {
	gone := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the client hung up
		close(gone)
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := post(t, c, ctx, u.URL, `{}`)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the connection end")
	}
}

// TestCancelMidStream: cancelling while an SSE body is being read fails the read with
// ctx.Err(), closes the connection, and the next call opens a new one.
func TestCancelMidStream(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, c, ctx, u.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "data: first") {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	resp.Body.Close()
	waitFor(t, func() bool { return u.closed() == 1 }, "the upstream's connection to close")
}

// TestDeadline: a context deadline bounds the exchange and reads as a timeout.
func TestDeadline(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := &http.Client{Transport: newTransport(t, Options{})}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := post(t, c, ctx, u.URL, `{}`)
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// TestCloseDuringRead: Close on another goroutine unblocks a Read in progress.
func TestCloseDuringRead(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	resp, err := post(t, c, context.Background(), u.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := resp.Body.Read(make([]byte, 10)); done <- err }()
	time.Sleep(50 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after Close succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock the Read")
	}
	waitFor(t, func() bool { return u.closed() == 1 }, "the connection to close")
}

// TestEarlyCloseDropsConnection: a body closed before its end is not reused.
func TestEarlyCloseDropsConnection(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	for range 2 {
		resp, err := post(t, c, context.Background(), u.URL, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	if n := u.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (an unfinished body closes its connection)", n)
	}
}

// TestUpstreamClosedIdleConnection: when the upstream closes a keep-alive connection while
// it is idle, the next call opens a new one instead of failing on the dead one.
func TestUpstreamClosedIdleConnection(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := &http.Client{Transport: newTransport(t, Options{})}
	for i := range 3 {
		resp, err := post(t, c, context.Background(), u.URL, `{}`)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		u.CloseClientConnections() // the upstream drops every connection (a restart, an idle timeout)
		waitFor(t, func() bool { return u.closed() == i+1 }, "the upstream to drop the connection")
	}
	if n := u.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

// TestConnectionCloseHeader: "Connection: close" from the upstream is honoured.
func TestConnectionCloseHeader(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	c := &http.Client{Transport: newTransport(t, Options{})}
	for range 2 {
		resp, err := post(t, c, context.Background(), u.URL, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if n := u.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestIdleTimeout: an idle connection is closed after IdleConnTimeout.
func TestIdleTimeout(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := &http.Client{Transport: newTransport(t, Options{IdleConnTimeout: 50 * time.Millisecond})}
	resp, err := post(t, c, context.Background(), u.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool { return u.closed() == 1 }, "the idle connection to be closed")
}

// TestMaxConnsPerHost: with one connection allowed, a second call waits for the first,
// and gives up with its context.
func TestMaxConnsPerHost(t *testing.T) {
	release := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	c := &http.Client{Transport: newTransport(t, Options{MaxConnsPerHost: 1})}
	first := make(chan error, 1)
	go func() {
		resp, err := post(t, c, context.Background(), u.URL+"?hold=1", `{}`)
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		first <- err
	}()
	waitFor(t, func() bool { return u.conns.Load() == 1 }, "the first call to be sent")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := post(t, c, ctx, u.URL, `{}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call while the only connection is busy: %v, want a timeout", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	resp, err := post(t, c, context.Background(), u.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := u.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// TestHeaderTooLarge: a response header above the limit fails the exchange.
func TestHeaderTooLarge(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 8<<10))
		io.WriteString(w, "ok")
	})
	c := &http.Client{Transport: newTransport(t, Options{MaxResponseHeaderBytes: 4 << 10})}
	if _, err := post(t, c, context.Background(), u.URL, `{}`); err == nil {
		t.Fatal("an 8 KiB header passed a 4 KiB limit")
	}
}

// TestRefused: a refused connection is reported as such (upstream.Error.NeverSent reads it).
func TestRefused(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := &http.Client{Transport: newTransport(t, Options{})}
	_, err := post(t, c, context.Background(), "http://"+addr+"/mcp", `{}`)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("err = %v, want a dial error", err)
	}
}

// TestTLSWithPrivateCA: an https upstream is verified against the configured roots only.
func TestTLSWithPrivateCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %d", r.ProtoMajor)
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := &http.Client{Transport: newTransport(t, Options{TLSClientConfig: &tls.Config{RootCAs: pool}})}
	resp, err := post(t, c, context.Background(), srv.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "tls 1" {
		t.Fatalf("answer %q", b)
	}
	c = &http.Client{Transport: newTransport(t, Options{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}})}
	if _, err := post(t, c, context.Background(), srv.URL, `{}`); err == nil {
		t.Fatal("a certificate from an unknown CA was accepted")
	}
}

// TestProxyFromSettings: a host the proxy settings send to a proxy goes through it (the
// request arrives at the proxy with the absolute URL, as net/http sends it).
func TestProxyFromSettings(t *testing.T) {
	var seen atomic.Value
	px := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.String())
		io.WriteString(w, "via proxy")
	})
	pu, _ := url.Parse(px.URL)
	tr := newTransport(t, Options{Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "upstream.invalid" {
			return pu, nil
		}
		return nil, nil
	}})
	resp, err := post(t, &http.Client{Transport: tr}, context.Background(), "http://upstream.invalid/mcp", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "via proxy" || seen.Load() != "http://upstream.invalid/mcp" {
		t.Fatalf("answer %q, proxy saw %v", b, seen.Load())
	}
}

// TestConcurrentCalls: many callers at once, each gets its own answer.
func TestConcurrentCalls(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	c := &http.Client{Transport: newTransport(t, Options{MaxIdleConnsPerHost: 4})}
	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				want := fmt.Sprintf("%d-%d", g, i)
				resp, err := post(t, c, context.Background(), u.URL, want)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want {
					errs <- fmt.Errorf("got %q %v, want %q", b, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// mustReadAll reads a request body to its end (what it could read when the client went away).
func mustReadAll(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}

// TestTimeoutFromTheParser: when the connection's deadline (the context's) fires a moment
// before the context's own timer, the error comes from fasthttp's header parser as its
// ErrTimeout, which is no net.Error; it must still read as the context's deadline.
func TestTimeoutFromTheParser(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	b := &body{ctx: ctx}
	if err := b.cause(fasthttp.ErrTimeout); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cause(fasthttp.ErrTimeout) = %v, want context.DeadlineExceeded", err)
	}
	if err := b.cause(io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cause(io.ErrUnexpectedEOF) = %v", err)
	}
}
