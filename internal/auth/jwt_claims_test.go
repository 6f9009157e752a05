package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTIdentityClaimsMustBeStrings: a tenant or subject claim that is present but not a
// non-empty string is an invalid credential, never "no tenant" (which would merge every
// such caller into the tenant-less owner of the same sub).
func TestJWTIdentityClaimsMustBeStrings(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksFor(t, &rk.PublicKey, &ek.PublicKey), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := NewJWT(JWTConfig{JWKSFile: path})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	tok := func(extra jwt.MapClaims) string {
		c := jwt.MapClaims{"exp": exp}
		for k, v := range extra {
			c[k] = v
		}
		return sign(t, jwt.SigningMethodES256, "e1", ek, c)
	}
	refused := map[string]jwt.MapClaims{
		"numeric tenant":  {"sub": "alice", "tenant": 7},
		"object tenant":   {"sub": "alice", "tenant": map[string]any{"id": "acme"}},
		"array tenant":    {"sub": "alice", "tenant": []any{"acme", "other"}},
		"empty tenant":    {"sub": "alice", "tenant": ""},
		"null tenant":     {"sub": "alice", "tenant": nil},
		"boolean tenant":  {"sub": "alice", "tenant": true},
		"numeric subject": {"sub": 42, "tenant": "acme"},
		"array subject":   {"sub": []any{"alice"}, "tenant": "acme"},
		"empty subject":   {"sub": "", "tenant": "acme"},
	}
	for name, claims := range refused {
		p, err := a.Authenticate(req("Authorization", "Bearer "+tok(claims)))
		if !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("%s: got %+v, %v; want ErrInvalidCredentials", name, p, err)
		}
	}
	if p, err := a.Authenticate(req("Authorization", "Bearer "+tok(jwt.MapClaims{"sub": "alice"}))); err != nil || p != (Principal{ID: "alice"}) {
		t.Errorf("absent tenant: %+v, %v; want alice without tenant", p, err)
	}
	if p, err := a.Authenticate(req("Authorization", "Bearer "+tok(jwt.MapClaims{"sub": "alice", "tenant": "acme"}))); err != nil || p != (Principal{"alice", "acme"}) {
		t.Errorf("string tenant: %+v, %v", p, err)
	}
}

// idp is a JWKS endpoint that can be taken down: while down, every fetch hangs until the
// client gives up (the worst case for a request that waits on it).
type idp struct {
	jwks    []byte
	down    atomic.Bool
	fetches atomic.Int32
	srv     *httptest.Server
}

func newIdP(t *testing.T, jwks []byte) *idp {
	i := &idp{jwks: jwks}
	i.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.fetches.Add(1)
		if i.down.Load() {
			<-r.Context().Done() // hangs until the fetch times out
			return
		}
		w.Write(i.jwks)
	}))
	t.Cleanup(i.srv.Close)
	return i
}

// TestJWKSCachedKeysServeWhileIdPDown (issue 18, acceptance 5): after one successful fetch
// the identity provider goes down (its fetches hang for the whole fetch timeout). Requests
// with valid tokens keep being authenticated from the cached keys, and none of them waits
// for a fetch: the slowest takes well under the fetch timeout, although background
// refreshes were attempted (and hung) all along.
func TestJWKSCachedKeysServeWhileIdPDown(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	i := newIdP(t, jwksFor(t, &rk.PublicKey, &ek.PublicKey))
	const fetchTimeout = 3 * time.Second
	a, err := NewJWT(JWTConfig{JWKSURL: i.srv.URL, Refresh: 50 * time.Millisecond,
		HTTPClient: &http.Client{Timeout: fetchTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tok := sign(t, jwt.SigningMethodES256, "e1", ek, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()})
	i.down.Store(true)
	var slowest time.Duration
	deadline := time.Now().Add(1500 * time.Millisecond) // many refresh intervals
	n := 0
	for time.Now().Before(deadline) {
		start := time.Now()
		p, err := a.Authenticate(req("Authorization", "Bearer "+tok))
		d := time.Since(start)
		if err != nil || p.ID != "carol" {
			t.Fatalf("request %d while the IdP is down: %+v, %v", n, p, err)
		}
		slowest = max(slowest, d)
		n++
		time.Sleep(20 * time.Millisecond)
	}
	if i.fetches.Load() < 2 {
		t.Fatalf("the IdP saw %d fetches: the background refresh never tried while it was down", i.fetches.Load())
	}
	t.Logf("%d requests while the IdP was down; slowest %v (fetch timeout %v)", n, slowest, fetchTimeout)
	if slowest > fetchTimeout/3 {
		t.Fatalf("slowest request took %v: it waited on a JWKS fetch (timeout %v)", slowest, fetchTimeout)
	}
}

// TestJWKSNotRefetchedPerRequest: with the IdP up, many requests past no refresh interval
// cause no fetch beyond the first.
func TestJWKSNotRefetchedPerRequest(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	i := newIdP(t, jwksFor(t, &rk.PublicKey, &ek.PublicKey))
	a, err := NewJWT(JWTConfig{JWKSURL: i.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tok := sign(t, jwt.SigningMethodRS256, "r1", rk, jwt.MapClaims{"sub": "dan", "exp": time.Now().Add(time.Hour).Unix()})
	for range 200 {
		if _, err := a.Authenticate(req("Authorization", "Bearer "+tok)); err != nil {
			t.Fatal(err)
		}
	}
	if n := i.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times for 200 requests, want 1", n)
	}
}

// TestJWKSUnreachableAtStart: a JWKS URL that cannot be fetched at start is a
// configuration error, and the error does not carry the URL's query or userinfo.
func TestJWKSUnreachableAtStart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	_, err := NewJWT(JWTConfig{JWKSURL: srv.URL + "/jwks?key=CANARYKEY"})
	if err == nil {
		t.Fatal("want an error for a JWKS answering 500")
	}
	if s := err.Error(); strings.Contains(s, "CANARYKEY") {
		t.Fatalf("error %q carries the URL's query", s)
	}
}
