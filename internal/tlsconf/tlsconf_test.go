package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// serve runs an HTTPS server with s's configuration on loopback; the handler answers with
// the common name of the client certificate, if any.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			io.WriteString(w, "client "+r.TLS.PeerCertificates[0].Subject.CommonName)
			return
		}
		io.WriteString(w, "anonymous")
	}))
	srv.TLS = s.Config()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// clientFor trusts ca and presents the pair certFile/keyFile when given.
func clientFor(t *testing.T, ca *testenv.CA, certFile, keyFile string) *http.Client {
	t.Helper()
	c, err := NewClient(ca.File, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.Config()}}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// served returns the leaf certificate the server at url presents.
func served(t *testing.T, ca *testenv.CA, url string) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func TestServerReloadKeepsOldPairOnFailure(t *testing.T) {
	ca := testenv.NewCA(t, "reload")
	certA, keyA := ca.Server(t, "a", "127.0.0.1")
	certB, keyB := ca.Server(t, "b", "127.0.0.1")
	s, err := NewServer(certA, keyA, "")
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s)
	if cn := served(t, ca, url).Subject.CommonName; cn != "a" {
		t.Fatalf("serves %q, want a", cn)
	}
	// A renewal: the same paths now hold b.
	copyFile(t, certB, certA)
	copyFile(t, keyB, keyA)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if cn := served(t, ca, url).Subject.CommonName; cn != "b" {
		t.Fatalf("after reload serves %q, want b", cn)
	}
	// A broken renewal (certificate written, key not yet): the reload fails, b stays.
	certC, _ := ca.Server(t, "c", "127.0.0.1")
	copyFile(t, certC, certA)
	if err := s.Reload(); err == nil {
		t.Fatal("reload of a certificate with a foreign key succeeded")
	}
	if cn := served(t, ca, url).Subject.CommonName; cn != "b" {
		t.Fatalf("after a failed reload serves %q, want b (kept)", cn)
	}
	if _, err := get(clientFor(t, ca, "", ""), url); err != nil {
		t.Fatalf("a client after the failed reload: %v", err)
	}
}

func TestMutualTLS(t *testing.T) {
	ca := testenv.NewCA(t, "mtls")
	cert, key := ca.Server(t, "server", "127.0.0.1")
	s, err := NewServer(cert, key, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	if !s.MutualTLS() {
		t.Fatal("MutualTLS false with a client CA")
	}
	url := serve(t, s)
	if _, err := get(clientFor(t, ca, "", ""), url); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	other := testenv.NewCA(t, "other")
	oc, ok := other.Client(t, "mallory")
	if _, err := get(clientFor(t, ca, oc, ok), url); err == nil {
		t.Fatal("a client certificate from a foreign CA was accepted")
	}
	cc, ck := ca.Client(t, "alice")
	body, err := get(clientFor(t, ca, cc, ck), url)
	if err != nil || body != "client alice" {
		t.Fatalf("client with a certificate: %q, %v", body, err)
	}
}

func TestClientPrivateCA(t *testing.T) {
	ca := testenv.NewCA(t, "private")
	cert, key := ca.Server(t, "upstream", "127.0.0.1")
	s, err := NewServer(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s)
	if body, err := get(clientFor(t, ca, "", ""), url); err != nil || body != "anonymous" {
		t.Fatalf("with the private CA: %q, %v", body, err)
	}
	// Without it (system roots) the upstream's certificate is unknown.
	var uerr x509.UnknownAuthorityError
	if _, err := get(&http.Client{}, url); !errors.As(err, &uerr) {
		t.Fatalf("with the system roots: %v, want an unknown authority error", err)
	}
}

func TestLoadErrors(t *testing.T) {
	ca := testenv.NewCA(t, "errs")
	cert, key := ca.Server(t, "s", "127.0.0.1")
	empty := t.TempDir() + "/empty.pem"
	os.WriteFile(empty, []byte("not pem\n"), 0o600)
	for name, f := range map[string]func() error{
		"missing cert":     func() error { _, err := NewServer(t.TempDir()+"/nope.pem", key, ""); return err },
		"key mismatch":     func() error { c2, _ := ca.Server(t, "s2"); _, err := NewServer(c2, key, ""); return err },
		"no key":           func() error { _, err := NewServer(cert, "", ""); return err },
		"empty client CA":  func() error { _, err := NewServer(cert, key, empty); return err },
		"half client pair": func() error { _, err := NewClient("", cert, ""); return err },
		"empty upstream CA": func() error {
			_, err := NewClient(empty, "", "")
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
