package auth

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestMetadataURLInsertsWellKnown(t *testing.T) {
	for resource, want := range map[string]string{
		"https://mcp.example.com/mcp":        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
		"https://mcp.example.com/public/mcp": "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
		"https://mcp.example.com":            "https://mcp.example.com/.well-known/oauth-protected-resource",
		"https://mcp.example.com/":           "https://mcp.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:8080/mcp":          "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
	} {
		if got := MetadataURL(resource); got != want {
			t.Errorf("MetadataURL(%q) = %q, want %q", resource, got, want)
		}
	}
}

func TestChallenge(t *testing.T) {
	for _, c := range []struct {
		scopes  []string
		invalid bool
		want    string
	}{
		{nil, false, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"`},
		{[]string{"tasks:read", "tasks:write"}, false, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="tasks:read tasks:write"`},
		{nil, true, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
	} {
		if got := Challenge("https://h/.well-known/oauth-protected-resource/mcp", c.scopes, c.invalid); got != c.want {
			t.Errorf("Challenge(%v, %v) =\n %s\nwant\n %s", c.scopes, c.invalid, got, c.want)
		}
	}
	if got := quote(`a"b\c`); got != `"a\"b\\c"` {
		t.Errorf("quote = %s", got)
	}
}

func TestProtectedResourceDocument(t *testing.T) {
	if _, err := NewProtectedResource(ProtectedResource{}); err == nil {
		t.Error("no authorization server: no error")
	}
	if _, err := NewProtectedResource(ProtectedResource{AuthorizationServers: []string{"https://idp"}, Resource: "https://h/mcp#x"}); err == nil {
		t.Error("resource with a fragment: no error")
	}
	p, err := NewProtectedResource(ProtectedResource{AuthorizationServers: []string{"https://idp.example.com"}, Scopes: []string{"mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	// Without a configured resource, each request names it: scheme, Host, /mcp.
	r := httptest.NewRequest("GET", "http://bridge.internal:8080"+WellKnownPath+"/mcp", nil)
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Code != 200 {
		t.Fatalf("HTTP %d %s: %v", w.Code, w.Body, err)
	}
	want := `map[authorization_servers:[https://idp.example.com] bearer_methods_supported:[header] resource:https://bridge.internal:8080/mcp resource_name:taskbridge scopes_supported:[mcp]]`
	if got := fmt.Sprint(doc); got != want {
		t.Errorf("document %s\nwant %s", got, want)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if got := p.Challenge(r, ErrNoCredentials); got != `Bearer resource_metadata="https://bridge.internal:8080/.well-known/oauth-protected-resource/mcp", scope="mcp"` {
		t.Errorf("Challenge = %s", got)
	}
	w = httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("POST", WellKnownPath, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: HTTP %d", w.Code)
	}
	// A configured resource wins over the Host, and its own path is served too.
	p2, _ := NewProtectedResource(ProtectedResource{Resource: "https://mcp.example.com/tools/mcp", AuthorizationServers: []string{"https://idp"}})
	if got := p2.Metadata(r).Resource; got != "https://mcp.example.com/tools/mcp" {
		t.Errorf("resource %q", got)
	}
	if paths := p2.Paths(); !slices.Contains(paths, WellKnownPath+"/tools/mcp") || !slices.Contains(paths, WellKnownPath) {
		t.Errorf("Paths = %v", paths)
	}
}
