package ops

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/metrics"
)

// TestDrainRefusesWebPages: every request shape a web page can send to POST /admin/drain
// (a cross-origin form, a same-site fetch, a text/plain beacon, a rebinding page) is
// refused and the replica keeps accepting; the documented curl form and a JSON POST from
// the listener's own origin still drain.
func TestDrainRefusesWebPages(t *testing.T) {
	refused := []struct {
		name   string
		header map[string]string
		body   string
		status int
	}{
		{"cross-origin form", map[string]string{"Origin": "https://evil.example",
			"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}, "a=1", 403},
		{"cross-origin form without fetch metadata", map[string]string{"Origin": "https://evil.example",
			"Content-Type": "application/x-www-form-urlencoded"}, "a=1", 403},
		{"same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site"}, "", 403},
		{"opaque origin", map[string]string{"Origin": "null"}, "", 403},
		{"rebound name", map[string]string{"Origin": "http://rebind.example:PORT"}, "", 403},
		{"multipart form", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", 415},
		{"text/plain beacon", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, "{}", 415},
		{"body without a type", nil, "drain=1", 415},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			d, srv := drainServer(t)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/drain", strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header.Set(k, strings.ReplaceAll(v, "PORT", port(srv.URL)))
			}
			if strings.Contains(tc.name, "rebound") {
				req.Host = "rebind.example:" + port(srv.URL) // what the page's browser sends
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), `"error"`) {
				t.Errorf("POST /admin/drain: %d %s, want %d with an error", resp.StatusCode, b, tc.status)
			}
			if d.Draining() {
				t.Fatal("the replica drains after a request a web page could send")
			}
		})
	}

	t.Run("curl -X POST", func(t *testing.T) {
		d, srv := drainServer(t)
		// The exact bytes `curl -X POST http://ADDR/admin/drain` sends (docs/operations.md).
		u, _ := url.Parse(srv.URL)
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /admin/drain HTTP/1.1\r\nHost: "+u.Host+"\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || !d.Draining() {
			t.Fatalf("curl -X POST: %d, draining %v; want 202 and a drain", resp.StatusCode, d.Draining())
		}
	})
	t.Run("JSON from the listener's own origin", func(t *testing.T) {
		d, srv := drainServer(t)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/drain", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || !d.Draining() {
			t.Fatalf("same-origin JSON POST: %d, draining %v; want 202 and a drain", resp.StatusCode, d.Draining())
		}
	})
	t.Run("GET pages unaffected", func(t *testing.T) {
		_, srv := drainServer(t)
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz with a foreign Origin: %d, want 200", resp.StatusCode)
		}
	})
}

func drainServer(t *testing.T) (*Drain, *httptest.Server) {
	d := NewDrain()
	srv := httptest.NewServer(Handler(Options{Logger: zerolog.Nop(), Metrics: metrics.New("test"), Drain: d, Inflight: &Inflight{}}))
	t.Cleanup(srv.Close)
	return d, srv
}

func port(rawURL string) string {
	u, _ := url.Parse(rawURL)
	return u.Port()
}
