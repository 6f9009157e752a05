package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func req(header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestAPIKeys(t *testing.T) {
	a, err := New(Config{APIKeys: []APIKey{
		{Key: "alice-key-0123456789", Principal: "alice", Tenant: "acme"},
		{Key: "bob-key-0123456789ab", Principal: "bob", Tenant: "acme"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		r       *http.Request
		want    Principal
		wantErr error
	}{
		{"alice", req("Authorization", "Bearer alice-key-0123456789"), Principal{"alice", "acme"}, nil},
		{"bob lower-case scheme", req("Authorization", "bearer bob-key-0123456789ab"), Principal{"bob", "acme"}, nil},
		{"none", req(), Principal{}, ErrNoCredentials},
		{"basic", req("Authorization", "Basic YWxpY2U6eA=="), Principal{}, ErrNoCredentials},
		{"wrong", req("Authorization", "Bearer alice-key-012345678"), Principal{}, ErrInvalidCredentials},
		{"prefix of a key", req("Authorization", "Bearer alice"), Principal{}, ErrInvalidCredentials},
	}
	for _, c := range cases {
		p, err := a.Authenticate(c.r)
		if !errors.Is(err, c.wantErr) || p != c.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, p, err, c.want, c.wantErr)
		}
	}
}

func TestAPIKeysConfigErrors(t *testing.T) {
	for _, keys := range [][]APIKey{
		{{Key: "short", Principal: "a"}},
		{{Key: "long-enough-key-000", Principal: ""}},
		{{Key: "long-enough-key-000", Principal: "a"}, {Key: "long-enough-key-000", Principal: "b"}},
	} {
		if _, err := NewAPIKeys(keys); err == nil {
			t.Errorf("NewAPIKeys(%+v): want an error", keys)
		}
	}
}

func TestPrincipalKeyNoCollision(t *testing.T) {
	a := Principal{ID: "b/c", Tenant: "a"}.Key()
	b := Principal{ID: "c", Tenant: "a/b"}.Key()
	if a == b {
		t.Fatalf("keys collide: %q", a)
	}
}

func TestNoneIsSingleUser(t *testing.T) {
	a, err := New(Config{})
	if err != nil || a != nil {
		t.Fatalf("New(empty) = %v, %v; want nil, nil", a, err)
	}
}

// jwksFor renders a JWKS with one RSA and one EC key.
func jwksFor(t *testing.T, rk *rsa.PublicKey, ek *ecdsa.PublicKey) []byte {
	t.Helper()
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	pad := func(i *big.Int) []byte { b := make([]byte, 32); return i.FillBytes(b) }
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": enc(rk.N.Bytes()), "e": enc(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": enc(pad(ek.X)), "y": enc(pad(ek.Y))},
		{"kty": "oct", "kid": "skip", "k": "c2VjcmV0"},
	}}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksFor(t, &rk.PublicKey, &ek.PublicKey), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{JWT: &JWTConfig{JWKSFile: path, Issuer: "https://idp", Audience: "taskbridge"}})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	good := jwt.MapClaims{"sub": "alice", "tenant": "acme", "iss": "https://idp", "aud": "taskbridge", "exp": exp}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name string
		tok  string
		ok   bool
	}{
		{"RS256", sign(t, jwt.SigningMethodRS256, "r1", rk, good), true},
		{"ES256", sign(t, jwt.SigningMethodES256, "e1", ek, good), true},
		{"expired", sign(t, jwt.SigningMethodRS256, "r1", rk, with("exp", time.Now().Add(-time.Hour).Unix())), false},
		{"no exp", sign(t, jwt.SigningMethodRS256, "r1", rk, with("exp", nil)), false},
		{"wrong issuer", sign(t, jwt.SigningMethodRS256, "r1", rk, with("iss", "https://evil")), false},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, "r1", rk, with("aud", "other")), false},
		{"no sub", sign(t, jwt.SigningMethodRS256, "r1", rk, with("sub", nil)), false},
		{"unknown kid", sign(t, jwt.SigningMethodES256, "zz", ek, good), false},
		{"foreign key", sign(t, jwt.SigningMethodES256, "e1", other, good), false},
		{"alg/key mismatch", sign(t, jwt.SigningMethodES256, "r1", ek, good), false},
		{"HS256 with the public key as secret", sign(t, jwt.SigningMethodHS256, "r1", []byte("secret"), good), false},
	}
	for _, c := range cases {
		p, err := a.Authenticate(req("Authorization", "Bearer "+c.tok))
		if c.ok && (err != nil || p != (Principal{"alice", "acme"})) {
			t.Errorf("%s: got %+v, %v; want alice@acme", c.name, p, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("%s: got %+v, %v; want ErrInvalidCredentials", c.name, p, err)
		}
	}
}

func TestJWKSURLRefetchesOnUnknownKid(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	var cur atomic.Pointer[[]byte]
	b1 := jwksFor(t, &rk.PublicKey, &k1.PublicKey)
	cur.Store(&b1)
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Write(*cur.Load())
	}))
	defer srv.Close()
	a, err := NewJWT(JWTConfig{JWKSURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{"sub": "bob", "exp": time.Now().Add(time.Hour).Unix()}
	if _, err := a.Authenticate(req("Authorization", "Bearer "+sign(t, jwt.SigningMethodES256, "e1", k1, claims))); err != nil {
		t.Fatalf("first key: %v", err)
	}
	// The IdP rotates: e1 is now k2. A token signed by k2 under kid "e2" is unknown until
	// the set is fetched again.
	b2, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": "e2", "crv": "P-256",
		"x": base64.RawURLEncoding.EncodeToString(k2.X.FillBytes(make([]byte, 32))),
		"y": base64.RawURLEncoding.EncodeToString(k2.Y.FillBytes(make([]byte, 32)))}}})
	cur.Store(&b2)
	p, err := a.Authenticate(req("Authorization", "Bearer "+sign(t, jwt.SigningMethodES256, "e2", k2, claims)))
	if err != nil || p.ID != "bob" {
		t.Fatalf("rotated key: %+v, %v", p, err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
}

func TestTrustedHeader(t *testing.T) {
	a, err := New(Config{TrustedHeader: &TrustedHeaderConfig{Principal: "X-Forwarded-User", Tenant: "X-Forwarded-Tenant", From: []string{"10.0.0.0/8"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := req("X-Forwarded-User", "carol", "X-Forwarded-Tenant", "acme")
	r.RemoteAddr = "10.1.2.3:5555"
	if p, err := a.Authenticate(r); err != nil || p != (Principal{"carol", "acme"}) {
		t.Fatalf("from proxy: %+v, %v", p, err)
	}
	r.RemoteAddr = "192.0.2.9:5555"
	if _, err := a.Authenticate(r); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("from elsewhere: %v, want ErrInvalidCredentials", err)
	}
	r2 := req()
	r2.RemoteAddr = "10.1.2.3:5555"
	if _, err := a.Authenticate(r2); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no header: %v", err)
	}
}

func TestChainKeyAndJWT(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	path := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(path, jwksFor(t, &rk.PublicKey, &ek.PublicKey), 0o600)
	a, err := New(Config{
		APIKeys: []APIKey{{Key: "alice-key-0123456789", Principal: "alice"}},
		JWT:     &JWTConfig{JWKSFile: path},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(req("Authorization", "Bearer alice-key-0123456789")); err != nil || p.ID != "alice" {
		t.Fatalf("key: %+v %v", p, err)
	}
	tok := sign(t, jwt.SigningMethodES256, "e1", ek, jwt.MapClaims{"sub": "dave", "exp": time.Now().Add(time.Minute).Unix()})
	if p, err := a.Authenticate(req("Authorization", "Bearer "+tok)); err != nil || p.ID != "dave" {
		t.Fatalf("jwt: %+v %v", p, err)
	}
	if _, err := a.Authenticate(req("Authorization", "Bearer nope.nope.nope")); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestTrustedHeaderTwice: a principal or tenant header given twice is refused, never read
// one way here and another way elsewhere.
func TestTrustedHeaderTwice(t *testing.T) {
	a, err := New(Config{TrustedHeader: &TrustedHeaderConfig{Principal: "X-Forwarded-User", Tenant: "X-Forwarded-Tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	r := req("X-Forwarded-User", "carol")
	r.Header.Add("X-Forwarded-User", "mallory")
	if _, err := a.Authenticate(r); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("principal twice: %v, want ErrInvalidCredentials", err)
	}
	r = req("X-Forwarded-User", "carol", "X-Forwarded-Tenant", "acme")
	r.Header.Add("X-Forwarded-Tenant", "other")
	if _, err := a.Authenticate(r); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("tenant twice: %v, want ErrInvalidCredentials", err)
	}
}
