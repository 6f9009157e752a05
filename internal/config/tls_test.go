package config

import (
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// TestTLSAndOAuthKeys: combinations that would be silently ignored, and files that do not
// load, are errors naming the key; good combinations validate.
func TestTLSAndOAuthKeys(t *testing.T) {
	ca := testenv.NewCA(t, "cfg")
	cert, key := ca.Server(t, "bridge", "127.0.0.1")
	other, _ := ca.Server(t, "other", "127.0.0.1")
	jwt := `{"jwt":{"jwks_file":"` + writeFile(t, `{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}`) + `"}}`
	base := []string{"--upstream", "https://up.example/mcp", "--admin", "127.0.0.1:9"}
	for _, c := range []struct {
		name string
		args []string
		want string // "" = valid
	}{
		{"listener TLS with mTLS on both", []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.File, "--admin-tls-client-ca", ca.File}, ""},
		{"cert without key", []string{"--tls-cert", cert}, "tls_cert: tls_cert and tls_key go together"},
		{"key of another cert", []string{"--tls-cert", other, "--tls-key", key}, "tls_cert: tls: certificate " + other},
		{"missing cert file", []string{"--tls-cert", "/nonexistent.pem", "--tls-key", key}, "no such file"},
		{"client CA without TLS", []string{"--tls-client-ca", ca.File}, "tls_client_ca: client certificates need TLS"},
		{"admin client CA not PEM", []string{"--tls-cert", cert, "--tls-key", key, "--admin-tls-client-ca", key}, "admin_tls_client_ca: tls: CA bundle"},
		{"upstream CA and client cert", []string{"--upstream-ca", ca.File, "--upstream-cert", cert, "--upstream-key", key}, ""},
		{"upstream CA for http", []string{"--upstream", "http://up/mcp", "--upstream-ca", ca.File}, "apply to an https:// upstream"},
		{"upstream cert without key", []string{"--upstream-cert", cert}, "upstream_cert: tls: a client certificate needs both"},
		{"oauth without jwt", []string{"--oauth-authorization-servers", "https://idp.example"}, "oauth_resource: oauth_resource, oauth_authorization_servers and oauth_scopes describe JWT"},
		{"oauth with jwt", []string{"--auth", jwt, "--oauth-resource", "https://mcp.example/mcp", "--oauth-authorization-servers", "https://idp.example", "--oauth-scopes", "mcp,tasks"}, ""},
		{"oauth resource with a fragment", []string{"--auth", jwt, "--oauth-resource", "https://mcp.example/mcp#x"}, "oauth_resource: a resource URL has no fragment"},
		{"oauth server not a URL", []string{"--auth", jwt, "--oauth-authorization-servers", "idp"}, `oauth_authorization_servers: want issuer URLs like https://idp.example.com, got "idp"`},
	} {
		cfg, err := load(t, append(append([]string{}, base...), c.args...), nil)
		if err == nil {
			err = cfg.Validate(true)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v\nwant it to contain %q", c.name, err, c.want)
		}
	}
}
