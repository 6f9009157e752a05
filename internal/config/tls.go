package config

import (
	"net/url"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/tlsconf"
)

// validateTLS checks the TLS keys go together and their files load, so "config check"
// finds a wrong path or a key that does not match its certificate before serve does.
func (c *Config) validateTLS(bad func(key, format string, args ...any)) {
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		bad("tls_cert", "tls_cert and tls_key go together: give both or neither")
	case c.TLSCert != "":
		if _, err := tlsconf.NewServer(c.TLSCert, c.TLSKey, c.TLSClientCA); err != nil {
			bad("tls_cert", "%v", err)
		}
		if c.AdminTLSClientCA != "" {
			if _, err := tlsconf.LoadPool(c.AdminTLSClientCA); err != nil {
				bad("admin_tls_client_ca", "%v", err)
			}
		}
	}
	for _, k := range []struct{ key, val string }{{"tls_client_ca", c.TLSClientCA}, {"admin_tls_client_ca", c.AdminTLSClientCA}} {
		if k.val != "" && c.TLSCert == "" {
			bad(k.key, "client certificates need TLS: set tls_cert and tls_key too")
		}
	}
	if c.AdminTLSClientCA != "" && !c.AdminEnabled() {
		bad("admin_tls_client_ca", "set, but there is no admin listener (admin)")
	}
	if c.UpstreamCA == "" && c.UpstreamCert == "" && c.UpstreamKey == "" {
		return
	}
	if u, err := url.Parse(c.Upstream); c.Upstream == "" || err != nil || u.Scheme != "https" {
		bad("upstream_ca", "upstream_ca, upstream_cert and upstream_key apply to an https:// upstream, and upstream is %q", c.Upstream)
		return
	}
	if _, err := tlsconf.NewClient(c.UpstreamCA, c.UpstreamCert, c.UpstreamKey); err != nil {
		bad("upstream_cert", "%v", err)
	}
}

// validateOAuth checks the protected-resource metadata keys: absolute URLs, and only with
// JWT authentication (the metadata points clients to an OAuth authorization server, which
// API keys and trusted headers have none of).
func (c *Config) validateOAuth(bad func(key, format string, args ...any)) {
	set := c.OAuthResource != "" || len(c.OAuthAuthorizationServers) > 0 || len(c.OAuthScopes) > 0
	if set && c.Auth.JWT == nil {
		bad("oauth_resource", "oauth_resource, oauth_authorization_servers and oauth_scopes describe JWT authentication: set auth.jwt too")
	}
	if c.OAuthResource != "" {
		if err := auth.CheckResourceURL(c.OAuthResource); err != nil {
			bad("oauth_resource", "%v", err)
		}
	}
	for _, s := range c.OAuthAuthorizationServers {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("oauth_authorization_servers", "want issuer URLs like https://idp.example.com, got %q", s)
		}
	}
}
