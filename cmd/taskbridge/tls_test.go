// Acceptance for TLS (issue 18): certificates made in the test (internal/testenv.CA, no
// openssl). The real TS SDK v1 client reaches "taskbridge serve" over HTTPS with a private CA;
// SIGHUP swaps in a renewed certificate and keeps the old one when the new one is broken;
// mTLS refuses a client without a certificate on the MCP and the admin listener; an upstream
// behind TLS with a private CA and a client certificate is reached with upstream_ca and
// upstream_cert, and refused without upstream_ca.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// tsClient runs one flow of interop/legacy-client.mjs (TS SDK v1) against url with extra
// environment, and returns its JSON line; crashed reports a crash (exit 1, "crash" key).
func tsClient(t *testing.T, url string, env []string, flow string, args ...string) (line string, crashed bool) {
	t.Helper()
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"legacy-client.mjs", "--url", url, "--flow", flow, "--timeout", "45000"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if !gjson.Valid(out) {
		t.Fatalf("legacy-client.mjs %s: no JSON line (exit %v)\nstdout: %s\nstderr: %s", flow, err, stdout.String(), stderr.String())
	}
	return out, gjson.Get(out, "crash").Exists()
}

// checkStreamFlow asserts what a user of callToolStream sees: the task created, its
// statuses, then the result with the related-task _meta.
func checkStreamFlow(t *testing.T, line, want string) {
	t.Helper()
	types := gjson.Get(line, "types").Array()
	if !gjson.Get(line, "ok").Bool() || len(types) < 2 || types[0].Str != "taskCreated" || types[len(types)-1].Str != "result" {
		t.Fatalf("stream flow: ok %v, types %v, failures %s\n%s", gjson.Get(line, "ok").Bool(), types, gjson.Get(line, "failures").Raw, line)
	}
	if st := gjson.Get(line, "statuses").Array(); len(st) == 0 || st[len(st)-1].Str != "completed" {
		t.Errorf("stream flow statuses %v, want … completed", st)
	}
	if txt := gjson.Get(line, "result.content.0.text").Str; txt != want {
		t.Errorf("stream flow result text %q, want %q", txt, want)
	}
	id := gjson.Get(line, "taskId").Str
	if rel := gjson.Get(line, `result._meta.io\.modelcontextprotocol/related-task.taskId`).Str; len(id) != 32 || rel != id {
		t.Errorf("stream flow: taskId %q, result related-task %q", id, rel)
	}
}

// httpsClient trusts ca and presents certFile/keyFile when given.
func httpsClient(t *testing.T, ca *testenv.CA, certFile, keyFile string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// servedCN is the common name of the certificate the listener at url presents now.
func servedCN(t *testing.T, ca *testenv.CA, url string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	host := strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://")
	host, _, _ = strings.Cut(host, "/")
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", host, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// waitLog waits until the serve log contains want.
func waitLog(t *testing.T, s *served, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func replaceFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTLSListenersAndReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "tls-upstream", Scale: 0.2, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })

	ca := testenv.NewCA(t, "bridge")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "bridge.pem"), filepath.Join(dir, "bridge-key.pem")
	c1, k1 := ca.Server(t, "bridge-1", "127.0.0.1", "localhost")
	replaceFile(t, c1, cert)
	replaceFile(t, k1, key)
	ops := testenv.NewCA(t, "operators")
	opCert, opKey := ops.Client(t, "prometheus")
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"),
		"--tls-cert", cert, "--tls-key", key, "--admin-tls-client-ca", ops.File)
	if !strings.HasPrefix(s.url, "https://") || !strings.HasPrefix(s.admin, "https://") {
		t.Fatalf("startup lines name %s and %s, want https://", s.url, s.admin)
	}

	t.Run("TS SDK v1 client over HTTPS with a custom CA", func(t *testing.T) {
		line, crashed := tsClient(t, s.url, []string{"NODE_EXTRA_CA_CERTS=" + ca.File}, "stream", "--args", `{"seconds":1}`)
		if crashed {
			t.Fatalf("crashed: %s", line)
		}
		checkStreamFlow(t, line, "Long job finished after 1s.")
		// Without the CA, Node refuses the certificate: the connection really is TLS.
		line, crashed = tsClient(t, s.url, nil, "tools")
		if !crashed || !strings.Contains(line, "unable to verify the first certificate") {
			t.Errorf("without NODE_EXTRA_CA_CERTS: want a certificate error, got %s", line)
		}
	})

	t.Run("admin listener over mTLS", func(t *testing.T) {
		resp, err := httpsClient(t, ops, opCert, opKey).Get(s.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("the admin listener trusted the operators' CA for its own certificate: HTTP %d", resp.StatusCode)
		}
		both := httpsClient(t, ca, opCert, opKey)
		resp, err = both.Get(s.admin + "/status")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /status with an operator certificate: %v %v", resp, err)
		}
		resp.Body.Close()
		if resp, err := httpsClient(t, ca, "", "").Get(s.admin + "/status"); err == nil {
			resp.Body.Close()
			t.Fatalf("GET /status without a client certificate: HTTP %d, want a refused handshake", resp.StatusCode)
		}
		// The MCP listener asks no client certificate (no tls_client_ca).
		resp, err = httpsClient(t, ca, "", "").Get(strings.TrimSuffix(s.url, "/mcp") + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /healthz on the MCP listener: %v %v", resp, err)
		}
		resp.Body.Close()
	})

	t.Run("SIGHUP reloads the certificate and keeps it when the new one is broken", func(t *testing.T) {
		if cn := servedCN(t, ca, s.url); cn != "bridge-1" {
			t.Fatalf("serves %q before the renewal", cn)
		}
		c2, k2 := ca.Server(t, "bridge-2", "127.0.0.1", "localhost")
		replaceFile(t, c2, cert)
		replaceFile(t, k2, key)
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLog(t, s, `"tls":"admin listener","time"`)
		if !strings.Contains(s.log.String(), `{"level":"info","tls":"mcp listener"`) || !strings.Contains(s.log.String(), "SIGHUP: certificates reloaded") {
			t.Errorf("the log does not say the certificates were reloaded:\n%s", s.log.String())
		}
		for _, u := range []string{s.url, s.admin} {
			if cn := servedCN(t, ca, u); cn != "bridge-2" {
				t.Errorf("%s serves %q after SIGHUP, want bridge-2", u, cn)
			}
		}
		// A renewal caught halfway: a new certificate next to the old key.
		c3, _ := ca.Server(t, "bridge-3", "127.0.0.1")
		replaceFile(t, c3, cert)
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLog(t, s, "certificate reload failed; keeping the certificates loaded before")
		if cn := servedCN(t, ca, s.url); cn != "bridge-2" {
			t.Errorf("serves %q after a failed reload, want bridge-2 (kept)", cn)
		}
		c := legacyclient.New(s.url)
		c.HTTP = httpsClient(t, ca, "", "")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatalf("a client after the failed reload: %v", err)
		}
		select {
		case err := <-s.exit:
			t.Fatalf("taskbridge exited on SIGHUP: %v", err)
		default:
		}
	})
}

func TestMutualTLSRefusesClientWithoutCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "mtls-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	ca := testenv.NewCA(t, "mtls")
	cert, key := ca.Server(t, "bridge", "127.0.0.1")
	clients := testenv.NewCA(t, "clients")
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"),
		"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clients.File)

	anon := legacyclient.New(s.url)
	anon.HTTP = httpsClient(t, ca, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := anon.Initialize(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("initialize without a client certificate: %v, want a refused handshake", err)
	}
	line, crashed := tsClient(t, s.url, []string{"NODE_EXTRA_CA_CERTS=" + ca.File}, "tools")
	if !crashed {
		t.Errorf("TS SDK v1 client without a certificate was served: %s", line)
	}
	foreign := testenv.NewCA(t, "foreign")
	fc, fk := foreign.Client(t, "mallory")
	bad := legacyclient.New(s.url)
	bad.HTTP = httpsClient(t, ca, fc, fk)
	if _, err := bad.Initialize(ctx); err == nil {
		t.Errorf("initialize with a certificate from a foreign CA succeeded")
	}
	cc, ck := clients.Client(t, "alice")
	good := legacyclient.New(s.url)
	good.HTTP = httpsClient(t, ca, cc, ck)
	if _, err := good.Initialize(ctx); err != nil {
		t.Fatalf("initialize with a client certificate: %v", err)
	}
	id := createTask(t, good, 1, "mtls")
	res := call(t, good, "tasks/result", map[string]string{"taskId": id})
	if !strings.Contains(gjson.GetBytes(res, "content.0.text").Str, "42") {
		t.Errorf("tasks/result over mTLS: %s", res)
	}
}

func TestUpstreamBehindTLSWithPrivateCA(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	ca := testenv.NewCA(t, "upstream")
	upCert, upKey := ca.Server(t, "upstream", "127.0.0.1")
	bridgeCert, bridgeKey := ca.Client(t, "taskbridge")
	pair, err := tls.LoadX509KeyPair(upCert, upKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	fx := fixture.New(fixture.Options{Name: "tls-upstream", Scale: 0.2, PollIntervalMs: 200})
	// The upstream serves HTTPS with the private CA's certificate and wants the bridge's
	// client certificate.
	up := httptest.NewUnstartedServer(fx)
	up.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	up.StartTLS()
	t.Cleanup(func() { up.Close(); fx.Close() })

	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"),
		"--upstream-ca", ca.File, "--upstream-cert", bridgeCert, "--upstream-key", bridgeKey)
	c := legacyClient(t, s.url, "tls-client", "1.0")
	id := createTask(t, c, 1, "behind-tls")
	res := call(t, c, "tasks/result", map[string]string{"taskId": id})
	if !strings.Contains(gjson.GetBytes(res, "content.0.text").Str, "42") {
		t.Fatalf("tasks/result through the TLS upstream: %s", res)
	}
	if n := fx.Stats().Executions["slow_compute"]; n != 1 {
		t.Errorf("the upstream ran slow_compute %d times, want 1", n)
	}

	t.Run("without upstream_ca the certificate is refused", func(t *testing.T) {
		s2 := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"),
			"--upstream-cert", bridgeCert, "--upstream-key", bridgeKey, "--status-timeout", "2s")
		c2 := legacyclient.New(s2.url)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := c2.Initialize(ctx)
		if err == nil {
			_, err = c2.Call(ctx, "tools/call", json.RawMessage(`{"name":"greet","arguments":{"name":"x"}}`))
		}
		if err == nil {
			t.Fatal("a call through an upstream with an unknown CA succeeded")
		}
		waitLog(t, s2, "certificate signed by unknown authority")
	})
}
