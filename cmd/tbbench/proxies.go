package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The reference proxies of the pass-through table, each its own process in front of the
// same upstream, each tuned as design §10 says a proxy hop should be (keep-alive to the
// upstream, a pool sized for the load, no response buffering):
//
//   - nginx (Debian nginx-light): one C event loop, the floor of any hop on this machine;
//   - Caddy (Debian caddy): a Go net/http server and net/http reverse proxy;
//   - rproxy: Go's httputil.ReverseProxy with a transport sized for the load, this binary
//     re-run with -reverse-proxy (the bare Go standard library, nothing else).
//
// A proxy whose binary is missing is reported and skipped, so the table still prints.

// proxy is one running reference proxy: its /mcp URL and how to stop it.
type proxy struct {
	name string
	url  string
	stop func()
}

// startProxies starts every reference proxy in front of upURL (host:port of the fixture).
func startProxies(ctx context.Context, o options, dir, upURL string) []proxy {
	var ps []proxy
	if url, stop := startNginx(o.nginx, dir, upURL); url != "" {
		ps = append(ps, proxy{"nginx", url, stop})
	}
	if url, stop := startCaddy(o.caddy, dir, upURL); url != "" {
		ps = append(ps, proxy{"caddy", url, stop})
	}
	if url, stop := startReverseProxy(ctx, o, dir, upURL); url != "" {
		ps = append(ps, proxy{"rproxy", url, stop})
	}
	return ps
}

// upstreamHostPort is "127.0.0.1:PORT" of an http://127.0.0.1:PORT/mcp URL.
func upstreamHostPort(upURL string) string { return upURL[len("http://") : len(upURL)-len("/mcp")] }

// startNginx runs nginx as a tuned reverse proxy to upURL (1 worker, upstream keep-alive
// 64, no buffering); "" when nginx is not installed.
func startNginx(bin, dir, upURL string) (string, func()) {
	if _, err := os.Stat(bin); err != nil {
		fmt.Println("   (nginx not installed: reference proxy skipped; apt-get install nginx-light)")
		return "", func() {}
	}
	port := freePort()
	nd := filepath.Join(dir, "nginx")
	os.MkdirAll(nd, 0o755)
	conf := fmt.Sprintf(`worker_processes 1; daemon off; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fcgi; uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream up { server %[2]s; keepalive 64; }
  server { listen 127.0.0.1:%[3]d; location / { proxy_pass http://up; proxy_http_version 1.1;
    proxy_set_header Connection ""; proxy_buffering off; proxy_request_buffering off; } } }
`, nd, upstreamHostPort(upURL), port)
	cf := filepath.Join(nd, "nginx.conf")
	os.WriteFile(cf, []byte(conf), 0o644)
	cmd := exec.Command(bin, "-c", cf, "-p", nd)
	if err := cmd.Start(); err != nil {
		fmt.Println("   (nginx failed to start:", err, ")")
		return "", func() {}
	}
	waitListening(port)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
}

// startCaddy runs Caddy as a reverse proxy to upURL: its JSON configuration, admin API
// off, no automatic HTTPS, errors-only logging, keep-alive pool of 256 idle connections
// per host, responses flushed at once (flush_interval -1, as SSE needs); "" when Caddy is
// not installed.
func startCaddy(bin, dir, upURL string) (string, func()) {
	if _, err := os.Stat(bin); err != nil {
		fmt.Println("   (caddy not installed: reference proxy skipped; apt-get install caddy)")
		return "", func() {}
	}
	port := freePort()
	cd := filepath.Join(dir, "caddy")
	os.MkdirAll(cd, 0o755)
	conf := fmt.Sprintf(`{"admin":{"disabled":true},"logging":{"logs":{"default":{"level":"ERROR"}}},
"apps":{"http":{"servers":{"bench":{"listen":["127.0.0.1:%d"],"automatic_https":{"disable":true},
"routes":[{"handle":[{"handler":"reverse_proxy","flush_interval":-1,
"transport":{"protocol":"http","keep_alive":{"idle_timeout":90000000000,"max_idle_conns":1024,"max_idle_conns_per_host":256}},
"upstreams":[{"dial":"%s"}]}]}]}}}}}`, port, upstreamHostPort(upURL))
	cf := filepath.Join(cd, "caddy.json")
	os.WriteFile(cf, []byte(conf), 0o644)
	cmd := exec.Command(bin, "run", "--config", cf)
	// Caddy keeps its state under HOME/XDG dirs: keep them in the run's directory.
	cmd.Env = append(os.Environ(), "HOME="+cd, "XDG_DATA_HOME="+cd, "XDG_CONFIG_HOME="+cd)
	stderr := &prefixWriter{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		fmt.Println("   (caddy failed to start:", err, ")")
		return "", func() {}
	}
	if !waitListening(port) {
		fmt.Printf("   (caddy did not listen: %s)\n", stderr)
		cmd.Process.Kill()
		cmd.Wait()
		return "", func() {}
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
}

// startReverseProxy runs this benchmark's own binary with -reverse-proxy: Go's
// httputil.ReverseProxy tuned for the load (serveReverseProxy).
func startReverseProxy(ctx context.Context, o options, dir, upURL string) (string, func()) {
	bin := o.selfBin
	if bin == "" {
		bin = filepath.Join(dir, "tbbench")
		if out, err := goBuild(bin, "./cmd/tbbench"); err != nil {
			fmt.Printf("   (go build ./cmd/tbbench failed: %v: %s; httputil.ReverseProxy row skipped)\n", err, out)
			return "", func() {}
		}
		o.selfBin = bin
	}
	p, err := startChild(ctx, bin, []string{"-reverse-proxy", upURL})
	if err != nil {
		fmt.Println("   (httputil.ReverseProxy failed to start:", err, ")")
		return "", func() {}
	}
	return p.url, p.stop
}

// serveReverseProxy is the -reverse-proxy mode: a tuned httputil.ReverseProxy to upURL on
// a free loopback port, until SIGINT. Its first stdout line names its /mcp URL.
func serveReverseProxy(upURL string) error {
	u, err := url.Parse(upURL)
	if err != nil {
		return err
	}
	u.Path = ""
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout = 1024, 256, 90*time.Second
	tr.DisableCompression, tr.ForceAttemptHTTP2 = true, false
	rp.Transport = tr
	rp.FlushInterval = -1 // flush at once: SSE replies pass event by event
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go waitInterrupt(srv)
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// waitListening waits up to 5 s until something accepts on the loopback port.
func waitListening(port int) bool {
	for range 100 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// prefixWriter keeps the first max bytes written to it (a child's stderr, for an error).
type prefixWriter struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *prefixWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// waitInterrupt closes srv on SIGINT or SIGTERM.
func waitInterrupt(srv *http.Server) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Close()
}
