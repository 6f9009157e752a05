// Acceptance for the documented edge (issue 18, docs/deployment.md): nginx runs
// deploy/nginx/taskbridge.conf as shipped (only ports and certificate paths substituted) in
// front of a real "taskbridge serve" on loopback. TLS and authentication happen at nginx
// (auth_request to an auth service, the principal passed as a trusted header); the TS SDK v1
// client runs a task flow with a streamed tasks/result through it, and the stream's events
// arrive as they are sent, not when the response ends.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

const edgeToken = "edge-token-0123456789"

// edgeAuth is the auth service nginx asks (auth_request): a good bearer token is alice of
// tenant acme, anything else 401.
func edgeAuth(t *testing.T) (addr string, checks *atomic.Int64) {
	t.Helper()
	checks = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		if r.URL.Path != "/check" || r.Header.Get("Authorization") != "Bearer "+edgeToken {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edge"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Auth-User", "alice")
		w.Header().Set("X-Auth-Tenant", "acme")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), checks
}

// freePort reserves a loopback port for nginx.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// nginxConfig is deploy/nginx/taskbridge.conf with the test's ports and files: each
// replaced line must be in the shipped file, so the file and this test cannot drift apart.
func nginxConfig(t *testing.T, listen, bridge, authAddr, cert, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "deploy", "nginx", "taskbridge.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, r := range [][2]string{
		{"listen 443 ssl http2;", "listen " + listen + " ssl http2;"},
		{"server 127.0.0.1:8080;", "server " + bridge + ";"},
		{"server 127.0.0.1:9180;", "server " + authAddr + ";"},
		{"/etc/nginx/tls/mcp.example.com.crt", cert},
		{"/etc/nginx/tls/mcp.example.com.key", key},
	} {
		if !strings.Contains(conf, r[0]) {
			t.Fatalf("deploy/nginx/taskbridge.conf no longer has %q", r[0])
		}
		conf = strings.ReplaceAll(conf, r[0], r[1])
	}
	return conf
}

// startNginx runs nginx in the foreground with a test-only main config that includes the
// site file, all paths under dir; it is stopped (SIGQUIT: graceful) at the end.
func startNginx(t *testing.T, site, listen string) (errorLog string) {
	t.Helper()
	bin := "/usr/sbin/nginx"
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "%s (Debian package nginx-light; scripts/test.sh installs it under CI=true)", bin)
	}
	dir := t.TempDir()
	for _, d := range []string{"tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Join(dir, "tmp"), 0o777)
	sitePath := filepath.Join(dir, "taskbridge.conf")
	if err := os.WriteFile(sitePath, []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	errorLog = filepath.Join(dir, "error.log")
	main := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/tmp/body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
    include %[2]s;
}
`, dir, sitePath)
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", dir, "-e", errorLog, "-c", mainPath).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-p", dir, "-e", errorLog, "-c", mainPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) // graceful stop: workers finish, then exit
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(errorLog)
			t.Logf("nginx error.log:\n%s", b)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			return errorLog
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(errorLog)
			t.Fatalf("nginx exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx is not listening on %s after 15 s", listen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNginxDocsQuoteTheTestedFile: every directive docs/deployment.md quotes in its nginx
// block is in deploy/nginx/taskbridge.conf, the file the test below runs.
func TestNginxDocsQuoteTheTestedFile(t *testing.T) {
	root := testenv.RepoRoot(t)
	docs, err := os.ReadFile(filepath.Join(root, "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "nginx", "taskbridge.conf"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(docs), "```nginx\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || !strings.Contains(string(docs), "deploy/nginx/taskbridge.conf") {
		t.Fatal("docs/deployment.md has no nginx block naming deploy/nginx/taskbridge.conf")
	}
	n := 0
	for _, line := range strings.Split(block, "\n") {
		d, _, _ := strings.Cut(line, "#")
		if d = strings.TrimSpace(d); strings.HasSuffix(d, ";") {
			n++
			if !strings.Contains(string(conf), d) {
				t.Errorf("docs/deployment.md quotes %q, which deploy/nginx/taskbridge.conf does not have", d)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d directives quoted", n)
	}
}

func TestNginxInFrontOfTaskbridge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and nginx")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "edge-upstream", Scale: 0.2, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	authAddr, checks := edgeAuth(t)
	db := filepath.Join(t.TempDir(), "tb.db")
	s := startServe(t, bin, up.URL+"/mcp", db, "--heartbeat", "500ms",
		"--auth", `{"trusted_header":{"principal":"X-Forwarded-User","tenant":"X-Forwarded-Tenant","from":["127.0.0.1/32"]}}`)
	bridgeAddr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")

	ca := testenv.NewCA(t, "edge")
	cert, key := ca.Server(t, "mcp.example.com", "127.0.0.1", "mcp.example.com")
	listen := freePort(t)
	startNginx(t, nginxConfig(t, listen, bridgeAddr, authAddr, cert, key), listen)
	edge := "https://" + listen + "/mcp"

	t.Run("TS SDK v1 streamed task through nginx", func(t *testing.T) {
		line, crashed := tsClient(t, edge, []string{"NODE_EXTRA_CA_CERTS=" + ca.File}, "stream",
			"--bearer", edgeToken, "--args", `{"seconds":2}`)
		if crashed {
			t.Fatalf("crashed: %s", line)
		}
		checkStreamFlow(t, line, "Long job finished after 2s.")
		if n := len(gjson.Get(line, "types").Array()); n < 3 {
			t.Errorf("only %d stream messages: the status updates did not come through", n)
		}
		if checks.Load() == 0 {
			t.Error("nginx never asked the auth service")
		}
	})

	t.Run("the principal is the edge's, not the client's", func(t *testing.T) {
		// Without a token nginx refuses, with the auth service's challenge.
		line, crashed := tsClient(t, edge, []string{"NODE_EXTRA_CA_CERTS=" + ca.File}, "tools")
		if !crashed || !strings.Contains(line, "401") {
			t.Errorf("no token: want a 401 crash, got %s", line)
		}
		// A client naming itself in X-Forwarded-User gets alice's principal all the same.
		c := edgeClient(t, ca, edge)
		c.Header.Set("X-Forwarded-User", "mallory")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		out := runCmd(t, bin, "report", "--store", "sqlite:"+db, "--json")
		if p := gjson.Get(out, `clients.#.principal`).String(); !strings.Contains(p, "acme/alice") || strings.Contains(p, "mallory") {
			t.Errorf("principals seen by taskbridge: %s, want acme/alice only", p)
		}
	})

	t.Run("SSE events are not buffered", func(t *testing.T) {
		c := edgeClient(t, ca, edge)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		id := createTask(t, c, 20, "edge-sse") // 20 s at the fixture's scale 0.2: 4 s
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tasks/result", "params": map[string]string{"taskId": id}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, edge, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.SessionID())
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+edgeToken)
		start := time.Now()
		resp, err := c.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("tasks/result through nginx: Content-Type %q", ct)
		}
		var first, result time.Duration
		r := bufio.NewReader(resp.Body)
		for result == 0 {
			l, err := r.ReadString('\n')
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if first == 0 && strings.TrimSpace(l) != "" {
				first = time.Since(start)
			}
			if strings.HasPrefix(l, "data:") && strings.Contains(l, `"id":99`) {
				result = time.Since(start)
			}
			if err == io.EOF {
				break
			}
		}
		t.Logf("first SSE line after %s, the result after %s", first.Round(time.Millisecond), result.Round(time.Millisecond))
		// The task runs ~4 s and keep-alives come every 500 ms: an unbuffered proxy delivers
		// the first ones long before the result; a buffering one delivers all at the end.
		if result == 0 || result-first < time.Second {
			t.Errorf("first line at %s, result at %s: the stream was held back", first, result)
		}
	})
}

// edgeClient is a Go legacy client for the edge URL: trusts ca, sends the edge token.
func edgeClient(t *testing.T, ca *testenv.CA, url string) *legacyclient.Client {
	c := legacyclient.New(url)
	c.HTTP = httpsClient(t, ca, "", "")
	c.Header = http.Header{"Authorization": {"Bearer " + edgeToken}}
	return c
}
