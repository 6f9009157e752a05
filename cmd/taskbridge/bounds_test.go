package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// serveInProcess runs cmdServe in this process (a listener and an admin listener on free
// loopback ports) in front of a fixture upstream, and returns both base URLs. The serve
// ends, and is waited for, at test end.
func serveInProcess(t *testing.T, extra ...string) (mcpBase, adminBase string) {
	t.Helper()
	fx := fixture.New(fixture.Options{Scale: 0.1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	return serveInProcessAt(t, up.URL+"/mcp", "sqlite:"+filepath.Join(t.TempDir(), "tb.db"), extra...)
}

// serveInProcessAt is serveInProcess in front of the upstream URL, on the store storeArg.
func serveInProcessAt(t *testing.T, upstream, storeArg string, extra ...string) (mcpBase, adminBase string) {
	t.Helper()
	t.Setenv("TASKBRIDGE_CONFIG", "")
	args := append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream", upstream,
		"--store", storeArg, "--drain-quiet", "10ms", "--log-level", "error"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	stderr, banner := testenv.WatchServeLog(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmdServe(ctx, args, io.Discard, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case b := <-banner:
		for i, raw := range []string{b.MCP, b.Admin} {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" {
				t.Fatalf("start-up event endpoint %q: %v", raw, err)
			}
			if i == 0 {
				mcpBase = "http://" + u.Host
			} else {
				adminBase = "http://" + u.Host
			}
		}
	case err := <-done:
		t.Fatalf("serve returned before its start-up event: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve logged no start-up event within 30 s")
	}
	return mcpBase, adminBase
}

// TestListenerBounds: on both listeners a keep-alive connection left idle is closed by
// the bridge after idle_timeout (and not at once), a client trickling its headers is cut
// off after read_header_timeout, and a header block over max_header_bytes is refused with
// 431 while a normal one is served.
func TestListenerBounds(t *testing.T) {
	const idle, headers = 700 * time.Millisecond, 900 * time.Millisecond
	mcp, admin := serveInProcess(t, "--idle-timeout", idle.String(), "--read-header-timeout", headers.String(),
		"--max-header-bytes", "8192")
	for name, base := range map[string]string{"mcp listener": mcp, "admin listener": admin} {
		t.Run(name+": idle keep-alive closed", func(t *testing.T) {
			c, br := dialBase(t, base)
			if code := roundTrip(t, c, br, base, ""); code != http.StatusOK {
				t.Fatalf("GET /healthz: %d", code)
			}
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := br.ReadByte()
			waited := time.Since(start)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("idle connection: read %v after %s, want EOF (closed by the bridge)", err, waited)
			}
			if waited < idle/2 {
				t.Fatalf("idle connection closed after %s, before idle_timeout %s", waited, idle)
			}
		})
		t.Run(name+": slow headers cut off", func(t *testing.T) {
			c, br := dialBase(t, base)
			start := time.Now()
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // and never the blank line
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := io.ReadAll(br) // a 408 at most, then the close
			waited := time.Since(start)
			if err != nil {
				t.Fatalf("unfinished headers: %v after %s, want the connection closed by the bridge", err, waited)
			}
			if waited < headers/2 {
				t.Fatalf("unfinished headers cut off after %s, before read_header_timeout %s", waited, headers)
			}
		})
		t.Run(name+": oversized headers refused", func(t *testing.T) {
			c, br := dialBase(t, base)
			if code := roundTrip(t, c, br, base, strings.Repeat("a", 2048)); code != http.StatusOK {
				t.Fatalf("GET /healthz with a 2 KiB header: %d, want 200", code)
			}
			// net/http allows 4 KiB of slack above MaxHeaderBytes; 64 KiB is well past both.
			c, br = dialBase(t, base)
			if code := roundTrip(t, c, br, base, strings.Repeat("a", 64<<10)); code != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("GET /healthz with a 64 KiB header: %d, want 431", code)
			}
		})
	}
	t.Run("cross-origin form POST to /admin/drain", func(t *testing.T) {
		resp, err := http.DefaultClient.Do(formPost(t, admin+"/admin/drain"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin form POST: %d, want 403", resp.StatusCode)
		}
		resp, err = http.Get(admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !gjson.GetBytes(b, `checks.#(name=="accepting").ok`).Bool() {
			t.Fatalf("/readyz after the refused POST: %d %s; want accepting ok (no drain)", resp.StatusCode, b)
		}
	})
}

// formPost is what a hidden auto-submitting form on another site sends.
func formPost(t *testing.T, target string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader("x=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://attacker.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	return req
}

func dialBase(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends one keep-alive GET /healthz (with an X-Pad header when pad is set) and
// returns the status, leaving the connection open.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, base, pad string) int {
	t.Helper()
	req := "GET /healthz HTTP/1.1\r\nHost: " + strings.TrimPrefix(base, "http://") + "\r\n"
	if pad != "" {
		req += "X-Pad: " + pad + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
