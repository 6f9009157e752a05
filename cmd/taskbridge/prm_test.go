// Acceptance for OAuth protected-resource metadata (issue 18, RFC 9728 as the MCP
// authorization specification asks): with JWT auth, "taskbridge serve" answers a request
// without a token 401 with WWW-Authenticate: Bearer resource_metadata="…", serves the
// metadata at the path-suffixed and the root well-known URI, and the real TS SDK v1
// discovery functions find it, parse it and accept its resource; a valid token is served.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

const testIssuer = "https://idp.example.com"

// jwtKey makes an ES256 key, writes its JWKS to a file, and returns a signer of tokens for
// sub, and the file.
func jwtKey(t *testing.T) (sign func(sub string) string, jwksFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	pub, _ := key.PublicKey.Bytes() // 0x04 || X || Y
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
		"x": b64(pub[1:33]), "y": b64(pub[33:])}}})
	jwksFile = filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(sub string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": sub, "iss": testIssuer, "aud": "taskbridge",
			"exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, jwksFile
}

func TestProtectedResourceMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "prm-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	sign, jwks := jwtKey(t)
	authCfg := `{"jwt":{"jwks_file":"` + jwks + `","issuer":"` + testIssuer + `","audience":"taskbridge"}}`
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--auth", authCfg, "--oauth-scopes", "mcp:tools")
	base := strings.TrimSuffix(s.url, "/mcp")
	wantChallenge := `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`

	t.Run("401 challenge and metadata document", func(t *testing.T) {
		resp, err := http.Post(s.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != wantChallenge {
			t.Fatalf("no token: HTTP %d, WWW-Authenticate %q, want 401 and %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), wantChallenge)
		}
		for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
			code, body := get(t, base+path)
			if code != 200 {
				t.Fatalf("GET %s: HTTP %d %s", path, code, body)
			}
			for k, want := range map[string]string{"resource": s.url, "authorization_servers": `["` + testIssuer + `"]`,
				"bearer_methods_supported": `["header"]`, "scopes_supported": `["mcp:tools"]`} {
				got := gjson.Get(body, k)
				if (got.IsArray() && got.Raw != want) || (!got.IsArray() && got.Str != want) {
					t.Errorf("GET %s: %s = %s, want %s", path, k, got.Raw, want)
				}
			}
		}
	})

	t.Run("TS SDK v1 discovery", func(t *testing.T) {
		node, dir := testenv.Node22(t), testenv.InteropDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "prm-client.mjs", "--url", s.url, "--token", sign("alice"))
		cmd.Dir = dir
		out, err := cmd.Output()
		line := strings.TrimSpace(string(out))
		if err != nil || !gjson.Get(line, "ok").Bool() {
			t.Fatalf("prm-client.mjs: %v\n%s\nbridge log:\n%s", err, line, s.log.String())
		}
		for path, want := range map[string]string{
			"unauthorized.status":                       "401",
			"unauthorized.resourceMetadataUrl":          base + "/.well-known/oauth-protected-resource/mcp",
			"unauthorized.scope":                        "mcp:tools",
			"unauthorized.error":                        "",
			"badToken.status":                           "401",
			"badToken.error":                            "invalid_token",
			"metadata.resource":                         s.url,
			"metadata.authorization_servers.0":          testIssuer,
			"wellKnownMetadata.resource":                s.url,
			"wellKnownMetadata.scopes_supported.0":      "mcp:tools",
			"metadata.bearer_methods_supported.0":       "header",
			"resource":                                  s.url,
			"wellKnownMetadata.authorization_servers.#": "1",
		} {
			if got := gjson.Get(line, path).String(); got != want {
				t.Errorf("%s = %q, want %q", path, got, want)
			}
		}
		var tools []string
		for _, v := range gjson.Get(line, "tools").Array() {
			tools = append(tools, v.Str)
		}
		if !slices.Contains(tools, "slow_compute") {
			t.Errorf("with the token, tools/list gave %v", tools)
		}
	})

	t.Run("configured resource behind a proxy", func(t *testing.T) {
		s2 := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--auth", authCfg,
			"--oauth-resource", "https://mcp.example.com/tools/mcp", "--oauth-authorization-servers", "https://login.example.com,https://idp.example.com")
		resp, err := http.Post(s2.url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := resp.Header.Get("WWW-Authenticate"), `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/tools/mcp"`; got != want {
			t.Errorf("WWW-Authenticate %q, want %q", got, want)
		}
		code, body := get(t, strings.TrimSuffix(s2.url, "/mcp")+"/.well-known/oauth-protected-resource/tools/mcp")
		if code != 200 || gjson.Get(body, "resource").Str != "https://mcp.example.com/tools/mcp" ||
			gjson.Get(body, "authorization_servers").Raw != `["https://login.example.com","https://idp.example.com"]` {
			t.Errorf("metadata at the configured path: HTTP %d %s", code, body)
		}
	})
}

// TestNoMetadataWithoutJWT: API keys are not OAuth; no metadata, the plain challenge.
func TestNoMetadataWithoutJWT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "prm-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"),
		"--auth", `{"api_keys":[{"key":"0123456789abcdef0123","principal":"ci"}]}`)
	resp, err := http.Post(s.url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || got != `Bearer realm="taskbridge"` {
		t.Errorf("HTTP %d, WWW-Authenticate %q", resp.StatusCode, got)
	}
	if code, _ := get(t, strings.TrimSuffix(s.url, "/mcp")+"/.well-known/oauth-protected-resource"); code != 404 {
		t.Errorf("metadata without JWT auth: HTTP %d, want 404", code)
	}
}
