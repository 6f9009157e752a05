package forward_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
)

// jwtIdP is an identity provider for tests: one P-256 key, its JWKS served over real HTTP.
type jwtIdP struct {
	key *ecdsa.PrivateKey
	url string
}

func newJWTIdP(t *testing.T) *jwtIdP {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "kid": "k1", "use": "sig", "crv": "P-256",
		"x": enc(k.X.FillBytes(make([]byte, 32))), "y": enc(k.Y.FillBytes(make([]byte, 32))),
	}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return &jwtIdP{key: k, url: srv.URL + "/.well-known/jwks.json"}
}

// token signs claims (sub, tenant, …) with an hour of validity.
func (i *jwtIdP) token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	c := jwt.MapClaims{"exp": time.Now().Add(time.Hour).Unix(), "iss": "https://idp.test", "aud": "taskbridge"}
	for k, v := range claims {
		c[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func withJWT(t *testing.T, i *jwtIdP) envOpt {
	a, err := auth.NewJWT(auth.JWTConfig{JWKSURL: i.url, Issuer: "https://idp.test", Audience: "taskbridge"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return func(c *envConfig, _ *fixture.Options) { c.Door.Auth = a }
}

// TestJWTTenantsStayApart (issue 12, acceptance 4) runs through the whole bridge with a real
// JWKS over HTTP: a token whose tenant claim is a number, an object, an array or "" is
// refused with 401 (it is never "no tenant"); two tenants with the same sub are two owners,
// and each gets for the other's task exactly the bytes an unknown id gets.
func TestJWTTenantsStayApart(t *testing.T) {
	idp := newJWTIdP(t)
	e := newEnv(t, withJWT(t, idp))
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, tenant := range map[string]any{"numeric": 7, "object": map[string]any{"id": "acme"}, "array": []any{"acme"}, "empty": ""} {
		tok := idp.token(t, jwt.MapClaims{"sub": "alice", "tenant": tenant})
		if st, body := post(t, e.url, "", tok, initBody); st != http.StatusUnauthorized {
			t.Errorf("%s tenant claim: HTTP %d %s, want 401", name, st, body)
		}
	}

	acme := idp.token(t, jwt.MapClaims{"sub": "alice", "tenant": "acme"})
	other := idp.token(t, jwt.MapClaims{"sub": "alice", "tenant": "other"})
	none := idp.token(t, jwt.MapClaims{"sub": "alice"})
	a := e.keyed(acme)
	working := createTask(t, a, "long_job", map[string]any{"seconds": 600})
	done := createTask(t, a, "slow_compute", map[string]any{"seconds": 0})
	waitStatus(t, a, done, "completed")

	for name, tok := range map[string]string{"tenant other": other, "no tenant": none} {
		c := e.keyed(tok)
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			for _, victim := range []string{working, done} {
				body := func(id string) string {
					return fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":%q,"params":{"taskId":%q}}`, method, id)
				}
				st1, foreign := post(t, e.url, c.SessionID(), tok, body(victim))
				st2, unknown := post(t, e.url, c.SessionID(), tok, body(randomID()))
				if st1 != st2 || foreign != unknown || !strings.Contains(foreign, `"code":-32602`) {
					t.Errorf("%s, %s: foreign id %d %q, unknown id %d %q", name, method, st1, foreign, st2, unknown)
				}
			}
		}
		if list := call(t, c, "tasks/list", map[string]any{}); strings.Contains(list.Raw, working) || strings.Contains(list.Raw, done) {
			t.Errorf("%s lists tenant acme's tasks: %s", name, list.Raw)
		}
		// The session of one tenant is not the other's either.
		if st, _ := post(t, e.url, a.SessionID(), tok, body0(working)); st != http.StatusNotFound {
			t.Errorf("%s on acme's session: HTTP %d, want 404", name, st)
		}
	}
	if s := call(t, a, "tasks/get", id(working)).Get("status").Str; s != "working" {
		t.Fatalf("acme's task is %s after the others' attempts, want working", s)
	}
	call(t, a, "tasks/cancel", id(working))
}

func body0(taskID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, taskID)
}
