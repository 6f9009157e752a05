// Package auth authenticates the HTTP requests of MCP clients: static API keys
// (Authorization: Bearer <key>), JWTs validated against a JWKS (a file or a URL), or a
// trusted header set by an authenticating proxy in front of taskbridge. With none of them
// configured the bridge runs in single-user mode and binds tasks to the session instead.
//
// An Authenticator answers one question per request: which principal (and tenant) is
// this? It never sees or stores payloads, and errors never carry the presented secret, so
// they may be logged.
package auth

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Errors returned by Authenticate. They say what was wrong without repeating the secret.
var (
	// ErrNoCredentials: the request carries none of the credentials this authenticator reads.
	ErrNoCredentials = errors.New("auth: no credentials")
	// ErrInvalidCredentials: credentials were presented but are not valid.
	ErrInvalidCredentials = errors.New("auth: invalid credentials")
)

// Principal is an authenticated caller: ID within Tenant. Tenant may be empty.
type Principal struct {
	ID     string
	Tenant string
}

// Key is the principal's stable identity string, the one tasks and sessions are bound to.
// Both parts are path-escaped, so ("a/b","c") and ("a","b/c") never collide.
func (p Principal) Key() string {
	return url.PathEscape(p.Tenant) + "/" + url.PathEscape(p.ID)
}

// Authenticator identifies the caller of one HTTP request.
//
// Concurrency: implementations are safe for concurrent use.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// Config is the "auth" section of the configuration. Any combination may be set; a
// request is accepted by the first method that recognises its credentials.
type Config struct {
	APIKeys       []APIKey             `yaml:"api_keys"`
	JWT           *JWTConfig           `yaml:"jwt"`
	TrustedHeader *TrustedHeaderConfig `yaml:"trusted_header"`
}

// Enabled reports whether any authentication method is configured.
func (c Config) Enabled() bool {
	return len(c.APIKeys) > 0 || c.JWT != nil || c.TrustedHeader != nil
}

// New builds the Authenticator for c, or returns nil (single-user mode) when c configures
// nothing.
func New(c Config) (Authenticator, error) {
	var chain Chain
	if len(c.APIKeys) > 0 {
		k, err := NewAPIKeys(c.APIKeys)
		if err != nil {
			return nil, err
		}
		chain = append(chain, k)
	}
	if c.JWT != nil {
		j, err := NewJWT(*c.JWT)
		if err != nil {
			return nil, err
		}
		chain = append(chain, j)
	}
	if c.TrustedHeader != nil {
		h, err := NewTrustedHeader(*c.TrustedHeader)
		if err != nil {
			return nil, err
		}
		chain = append(chain, h)
	}
	if len(chain) == 0 {
		return nil, nil
	}
	if len(chain) == 1 {
		return chain[0], nil
	}
	return chain, nil
}

// Chain tries each Authenticator in order. The first to accept wins; one that rejects
// presented credentials (ErrInvalidCredentials) does not stop the others, since a bearer
// token may be meant for a later method (an API key is not a JWT).
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(r *http.Request) (Principal, error) {
	err := ErrNoCredentials
	for _, a := range c {
		p, e := a.Authenticate(r)
		if e == nil {
			return p, nil
		}
		if errors.Is(e, ErrInvalidCredentials) {
			err = e
		}
	}
	return Principal{}, err
}

// Close releases what an Authenticator holds (the JWKS refresh goroutine of a JWT
// authenticator, also inside a Chain). Nil and authenticators holding nothing are fine.
func Close(a Authenticator) {
	switch a := a.(type) {
	case Chain:
		for _, m := range a {
			Close(m)
		}
	case io.Closer:
		_ = a.Close()
	}
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
