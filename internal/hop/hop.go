// Package hop is the transport of taskbridge's upstream HTTP clients (sep2663.Client towards
// a 2026-07-28 server, legacy.Client towards a 2025-11-25 one): an http.RoundTripper for
// HTTP/1.1 upstreams that writes requests and parses responses with
// github.com/valyala/fasthttp and runs every exchange on the caller's goroutine.
//
// Why not net/http's Transport: it runs two goroutines per connection (a read loop and a
// write loop) and hands every request and response between them and the caller over
// channels. On the bridge's hot path that hand-off, not the translation, was most of the
// cost of the hop (docs/benchmarks.md). Here a request is written, and its response header
// read, by the goroutine that called RoundTrip; the body is read by whoever reads
// Response.Body. No goroutine is started per request or per connection.
//
// Why not fasthttp's HostClient pool: it cannot abandon an exchange when the caller's
// context ends (it has no context), and its idle-connection cleaner is a goroutine that
// sleeps for the idle timeout and that no owner can stop. The pool here is small: a LIFO
// stack of idle connections per host, expired by a timer, with the context honoured
// everywhere (dial, TLS handshake, waiting for a connection slot, writing, waiting for the
// response, reading the body).
//
// What the clients keep from net/http: the *http.Client, *http.Request and *http.Response
// they already use, so headers (Mcp-*, traceparent), body caps and the instrumented
// transport (internal/metrics wraps any http.RoundTripper and keeps counting every upstream
// exchange) work unchanged.
//
// Behaviour, and where it differs from net/http's Transport:
//   - Cancellation: when the request's context ends, the exchange is abandoned at once (the
//     connection's deadline is moved to the past, which unblocks any read or write), the
//     connection is closed, never reused, and the error is ctx.Err(). A context deadline is
//     also the connection's deadline for the whole exchange, body included.
//   - Keep-alive: a connection goes back to the pool when its response body was read to the
//     end (or had none) and neither side asked to close. A body closed early closes the
//     connection, as with net/http. Before an idle connection is reused it is checked,
//     without blocking, for having been closed by the upstream (net/http's read loop
//     notices this in the background); a request whose write fails on a reused connection
//     before one byte went out is sent once more on a new one, as net/http does.
//   - Limits: MaxIdleConnsPerHost idle connections per host (256, as design §10 sizes the
//     pool for the concurrency), closed after IdleConnTimeout (90 s); MaxConnsPerHost, when
//     set, bounds connections in use (a request waits for one, or for its context); response
//     headers above MaxResponseHeaderBytes fail the exchange.
//   - TLS: https upstreams get Options.TLSClientConfig (internal/tlsconf: the custom CA, the
//     client certificate); ALPN offers http/1.1 only, so an https upstream is spoken to in
//     HTTP/1.1 where net/http may have negotiated HTTP/2.
//   - Proxies: Options.Proxy (default http.ProxyFromEnvironment, i.e. HTTP_PROXY,
//     HTTPS_PROXY and NO_PROXY, as net/http honoured them) is asked once per upstream
//     host; a host it sends to a proxy is served by a net/http Transport with the same TLS
//     configuration and pool size, exactly as before.
//   - No transparent gzip: responses arrive as the upstream sent them (Accept-Encoding is
//     not added), and no redirects are followed here (http.Client does that, as before).
package hop

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults of Options.
const (
	DefaultMaxIdleConnsPerHost    = 256
	DefaultIdleConnTimeout        = 90 * time.Second
	DefaultDialTimeout            = 30 * time.Second
	DefaultTLSHandshakeTimeout    = 10 * time.Second
	DefaultMaxResponseHeaderBytes = 32 << 10
	// userAgent is sent when a request names none (net/http would send Go-http-client/1.1).
	userAgent = "taskbridge"
)

// Options configure a Transport. The zero value is usable.
type Options struct {
	// TLSClientConfig is used for https upstreams (nil: the system roots). ServerName is
	// taken from the URL when empty; NextProtos is set to http/1.1.
	TLSClientConfig *tls.Config
	// MaxConnsPerHost bounds the connections in use at once per host; 0: no bound (the
	// work gate's max_upstream_inflight bounds calls; SSE streams must never starve).
	MaxConnsPerHost int
	// MaxIdleConnsPerHost bounds the idle connections kept per host (default 256).
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a connection idle that long (default 90 s).
	IdleConnTimeout time.Duration
	// DialTimeout and TLSHandshakeTimeout bound connecting (defaults 30 s and 10 s), inside
	// the request's context.
	DialTimeout         time.Duration
	TLSHandshakeTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response's status line and headers (default 32 KiB).
	MaxResponseHeaderBytes int
	// Proxy chooses a proxy per upstream host (nil: http.ProxyFromEnvironment). A host it
	// answers with a URL is served through a net/http Transport.
	Proxy func(*http.Request) (*url.URL, error)
}

// Transport is an http.RoundTripper for HTTP/1.1 upstreams (see the package
// documentation). Safe for concurrent use.
type Transport struct {
	o Options

	last atomic.Pointer[host] // the host of the last request: one upstream is the common case

	mu      sync.Mutex
	hosts   map[hostKey]*host
	proxied *http.Transport // made on first use, for hosts reached through a proxy
}

// hostKey names an upstream as a request's URL does.
type hostKey struct{ scheme, host string }

// NewTransport returns a Transport with o's settings, defaults filled in.
func NewTransport(o Options) *Transport {
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	if o.Proxy == nil {
		o.Proxy = http.ProxyFromEnvironment
	}
	return &Transport{o: o, hosts: map[hostKey]*host{}}
}

// Settings returns the options in force, defaults filled in.
func (t *Transport) Settings() Options { return t.o }

// RoundTrip implements http.RoundTripper. It always closes req.Body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeReqBody(req)
		return nil, errors.New("hop: request without a URL")
	}
	h, err := t.host(req)
	if err != nil {
		closeReqBody(req)
		return nil, err
	}
	if h.proxied {
		return t.proxyTransport().RoundTrip(req)
	}
	return h.roundTrip(req)
}

// CloseIdleConnections closes every idle connection (and the proxy transport's).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	hosts := make([]*host, 0, len(t.hosts))
	for _, h := range t.hosts {
		hosts = append(hosts, h)
	}
	pt := t.proxied
	t.mu.Unlock()
	for _, h := range hosts {
		h.closeIdle()
	}
	if pt != nil {
		pt.CloseIdleConnections()
	}
}

// host returns the pool for req's scheme and host, making it on first use.
func (t *Transport) host(req *http.Request) (*host, error) {
	k := hostKey{req.URL.Scheme, req.URL.Host}
	if h := t.last.Load(); h != nil && h.key == k {
		return h, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[k]
	if h == nil {
		var err error
		if h, err = t.newHost(k, req); err != nil {
			return nil, err
		}
		t.hosts[k] = h
	}
	t.last.Store(h)
	return h, nil
}

// newHost prepares the pool of one upstream: its dial address, its TLS configuration, and
// whether the proxy settings send it through a proxy.
func (t *Transport) newHost(k hostKey, req *http.Request) (*host, error) {
	if k.scheme != "http" && k.scheme != "https" {
		return nil, errors.New("hop: unsupported protocol scheme " + strconv.Quote(k.scheme))
	}
	if k.host == "" {
		return nil, errors.New("hop: request URL without a host")
	}
	h := &host{t: t, key: k, addr: k.host}
	if req.URL.Port() == "" {
		port := "80"
		if k.scheme == "https" {
			port = "443"
		}
		h.addr = net.JoinHostPort(req.URL.Hostname(), port)
	}
	pu, err := t.o.Proxy(&http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: k.scheme, Host: k.host}, Header: http.Header{}})
	if err != nil {
		return nil, err
	}
	h.proxied = pu != nil
	if k.scheme == "https" {
		cfg := &tls.Config{}
		if t.o.TLSClientConfig != nil {
			cfg = t.o.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		h.tls = cfg
	}
	if t.o.MaxConnsPerHost > 0 {
		h.slots = make(chan struct{}, t.o.MaxConnsPerHost)
	}
	return h, nil
}

// proxyTransport is the net/http Transport for hosts the proxy settings send to a proxy.
func (t *Transport) proxyTransport() *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proxied == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = t.o.Proxy
		tr.TLSClientConfig = t.o.TLSClientConfig
		tr.MaxIdleConns = 4 * t.o.MaxIdleConnsPerHost
		tr.MaxIdleConnsPerHost = t.o.MaxIdleConnsPerHost
		tr.MaxConnsPerHost = t.o.MaxConnsPerHost
		tr.IdleConnTimeout = t.o.IdleConnTimeout
		tr.TLSHandshakeTimeout = t.o.TLSHandshakeTimeout
		tr.MaxResponseHeaderBytes = int64(t.o.MaxResponseHeaderBytes)
		t.proxied = tr
	}
	return t.proxied
}

// roundTrip sends req on a pooled or new connection and reads the response header.
func (h *host) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	freq := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(freq)
	if err := buildRequest(freq, req); err != nil {
		return nil, err
	}
	if err := h.acquireSlot(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		get := h.get
		if attempt > 0 {
			get = h.fresh // the retry goes on a new connection
		}
		c, err := get(ctx)
		if err != nil {
			h.releaseSlot()
			return nil, err
		}
		resp, retry, err := c.exchange(ctx, freq, req)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt > 0 {
			h.releaseSlot()
			return nil, err
		}
	}
}

// buildRequest copies req into f: method, request URI, Host, headers as given (net/http
// writes header names as the map holds them; so does this), and the body, which it reads
// and closes.
func buildRequest(f *fasthttp.Request, req *http.Request) error {
	f.Header.DisableNormalizing()
	f.Header.SetNoDefaultContentType(true)
	f.Header.SetMethod(req.Method)
	f.SetRequestURI(req.URL.RequestURI())
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	f.Header.SetHost(host)
	ua := false
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // from req itself, as net/http does
		case "User-Agent":
			ua = true
		}
		for _, v := range vs {
			f.Header.Add(k, v)
		}
	}
	if !ua {
		f.Header.SetUserAgent(userAgent)
	}
	if req.Close {
		f.SetConnectionClose()
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	_, err := io.Copy(f.BodyWriter(), req.Body)
	req.Body.Close()
	if err != nil {
		return errors.New("hop: reading the request body: " + err.Error())
	}
	return nil
}

// closeReqBody honours RoundTrip's contract of always closing the request body.
func closeReqBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// toResponse converts a parsed response header into an *http.Response (header names in
// net/http's canonical form) whose Body streams the rest.
func toResponse(f *fasthttp.Response, req *http.Request, body io.ReadCloser) *http.Response {
	hdr := make(http.Header, 8)
	for k, v := range f.Header.All() {
		key := http.CanonicalHeaderKey(string(k))
		hdr[key] = append(hdr[key], string(v))
	}
	code := f.StatusCode()
	return &http.Response{
		Status:        status(code, f.Header.StatusMessage()),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		ContentLength: int64(max(f.Header.ContentLength(), -1)),
		Close:         f.ConnectionClose(),
		Body:          body,
		Request:       req,
	}
}

// status is the Response.Status text, "200 OK".
func status(code int, msg []byte) string {
	if code == http.StatusOK && (len(msg) == 0 || string(msg) == "OK") {
		return "200 OK"
	}
	text := string(msg)
	if text == "" {
		text = http.StatusText(code)
	}
	return strconv.Itoa(code) + " " + text
}
