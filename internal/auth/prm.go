package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// OAuth 2.0 Protected Resource Metadata (RFC 9728), as the MCP authorization specification
// (2025-11-25 and 2026-07-28, "Authorization Server Discovery") asks of an HTTP server that
// requires OAuth access tokens: a metadata document at a well-known URI naming the
// authorization servers, and a 401 whose WWW-Authenticate challenge points at it. taskbridge
// serves it when JWT authentication is configured; API keys and trusted headers have no
// authorization server to point to.

// WellKnownPath is the well-known URI suffix of RFC 9728 §3.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// MCPPath is the path of the bridge's MCP endpoint, the default resource path.
const MCPPath = "/mcp"

// ResourceMetadata is the RFC 9728 §2 document, the members taskbridge fills in.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// ProtectedResource describes the bridge's MCP endpoint as an OAuth protected resource.
type ProtectedResource struct {
	// Resource is the endpoint's public URL as clients use it. Empty: taken from each
	// request (its scheme and Host, path MCPPath), which is right only when clients reach
	// the bridge directly; behind a proxy, configure it.
	Resource string
	// AuthorizationServers are the issuer URLs of the authorization servers (at least one).
	AuthorizationServers []string
	// Scopes are listed in the document and in the challenge (optional).
	Scopes []string
}

// CheckResourceURL validates a configured resource identifier: an absolute http(s) URL
// without a fragment (RFC 9728 §1.2; https outside of tests).
func CheckResourceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("want the endpoint's public URL like https://mcp.example.com/mcp, got %q", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("a resource URL has no fragment, got %q", s)
	}
	return nil
}

// NewProtectedResource checks p: at least one authorization server, a valid resource.
func NewProtectedResource(p ProtectedResource) (*ProtectedResource, error) {
	if len(p.AuthorizationServers) == 0 {
		return nil, errors.New("auth: protected-resource metadata needs at least one authorization server")
	}
	if p.Resource != "" {
		if err := CheckResourceURL(p.Resource); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	return &p, nil
}

// resource is the resource identifier for a request to the bridge.
func (p *ProtectedResource) resource(r *http.Request) string {
	if p.Resource != "" {
		return p.Resource
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + MCPPath
}

// Metadata is the document for a request.
func (p *ProtectedResource) Metadata(r *http.Request) ResourceMetadata {
	return ResourceMetadata{Resource: p.resource(r), AuthorizationServers: p.AuthorizationServers,
		BearerMethodsSupported: []string{"header"}, ScopesSupported: p.Scopes, ResourceName: "taskbridge"}
}

// MetadataURL is where the document for resource lives (RFC 9728 §3.1): the well-known
// suffix inserted between the host and the resource's path, so https://h/mcp has its
// metadata at https://h/.well-known/oauth-protected-resource/mcp.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + WellKnownPath + path
}

// Paths are the paths the document is served at: the path-suffixed form for the resource
// (what MCP clients try first) and the root form (their fallback).
func (p *ProtectedResource) Paths() []string {
	paths := []string{WellKnownPath, WellKnownPath + MCPPath}
	if p.Resource != "" {
		if u, err := url.Parse(MetadataURL(p.Resource)); err == nil && u.Path != paths[0] && u.Path != paths[1] {
			paths = append(paths, u.Path)
		}
	}
	return paths
}

// ServeHTTP serves the document (GET or HEAD). It is public: it names the authorization
// servers and nothing about callers, and browser-based clients fetch it cross-origin.
func (p *ProtectedResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, _ := json.Marshal(p.Metadata(r))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Write(append(b, '\n'))
}

// Challenge is the WWW-Authenticate value of a 401 for the request r that failed with err:
// the Bearer challenge with resource_metadata (RFC 9728 §5.1), the scopes (RFC 6750 §3, as
// the MCP specification recommends) and, when a token was presented but refused,
// error="invalid_token".
func (p *ProtectedResource) Challenge(r *http.Request, err error) string {
	return Challenge(MetadataURL(p.resource(r)), p.Scopes, errors.Is(err, ErrInvalidCredentials))
}

// Challenge builds a Bearer challenge pointing at metadataURL.
func Challenge(metadataURL string, scopes []string, invalidToken bool) string {
	var b strings.Builder
	b.WriteString("Bearer resource_metadata=" + quote(metadataURL))
	if len(scopes) > 0 {
		b.WriteString(", scope=" + quote(strings.Join(scopes, " ")))
	}
	if invalidToken {
		b.WriteString(`, error="invalid_token"`)
	}
	return b.String()
}

// quote makes an RFC 9110 quoted-string.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
