package main

import (
	"context"
	"crypto/tls"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/tlsconf"
)

// tlsSet is serve's TLS: the server side of each listener and the client side towards the
// upstream. A nil member means plain HTTP (the default; fine on loopback) or, for the
// upstream, the standard transport's TLS with the system roots.
type tlsSet struct {
	mcp, admin *tlsconf.Server
	upstream   *tlsconf.Client
}

// loadTLS reads the configured certificate files (docs/security.md, "TLS").
func loadTLS(cfg *config.Config) (*tlsSet, error) {
	t := &tlsSet{}
	var err error
	if cfg.TLSCert != "" {
		if t.mcp, err = tlsconf.NewServer(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA); err != nil {
			return nil, err
		}
		if t.admin, err = tlsconf.NewServer(cfg.TLSCert, cfg.TLSKey, cfg.AdminTLSClientCA); err != nil {
			return nil, err
		}
	}
	if cfg.UpstreamCA != "" || cfg.UpstreamCert != "" {
		if t.upstream, err = tlsconf.NewClient(cfg.UpstreamCA, cfg.UpstreamCert, cfg.UpstreamKey); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// upstreamConfig is the upstream transport's TLS configuration; nil for the default.
func (t *tlsSet) upstreamConfig() *tls.Config {
	if t == nil || t.upstream == nil {
		return nil
	}
	return t.upstream.Config()
}

// reload re-reads every certificate file; one that fails to load keeps what it replaced
// and is logged (the files' paths only, never their content).
func (t *tlsSet) reload(log zerolog.Logger) {
	for _, r := range []struct {
		name string
		s    interface{ Reload() error }
		ok   bool
	}{{"mcp listener", t.mcp, t.mcp != nil}, {"admin listener", t.admin, t.admin != nil}, {"upstream client", t.upstream, t.upstream != nil}} {
		if !r.ok {
			continue
		}
		if err := r.s.Reload(); err != nil {
			log.Error().Err(err).Str("tls", r.name).Msg("SIGHUP: certificate reload failed; keeping the certificates loaded before")
			continue
		}
		log.Info().Str("tls", r.name).Msg("SIGHUP: certificates reloaded")
	}
}

// onSIGHUP is everything serve does on SIGHUP. Keep it the one place: other reloadable
// settings join here.
func (s *server) onSIGHUP() {
	if s.tls.mcp == nil && s.tls.admin == nil && s.tls.upstream == nil {
		s.log.Info().Msg("SIGHUP: no certificates configured; nothing to reload")
		return
	}
	s.tls.reload(s.log)
}

// watchSIGHUP calls fn for every signal on hup until ctx ends. It blocks; the caller runs
// it on a goroutine it waits for.
func watchSIGHUP(ctx context.Context, hup <-chan os.Signal, fn func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			fn()
		}
	}
}

// serveHTTP serves srv on ln, over TLS when ts is set. The server's own error lines (a
// failed TLS handshake, mostly) go to the structured log.
func serveHTTP(srv *http.Server, ln net.Listener, ts *tlsconf.Server, log zerolog.Logger) error {
	srv.ErrorLog = stdlog.New(httpErrorWriter{log}, "", 0)
	if ts == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = ts.Config()
	return srv.ServeTLS(ln, "", "")
}

// httpErrorWriter logs the lines of an http.Server's ErrorLog: failed TLS handshakes (a
// client without a certificate under mTLS, a scanner, an untrusting client) at debug, since
// anyone on the network can cause them; anything else at warn.
type httpErrorWriter struct{ log zerolog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	ev := w.log.Warn()
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		ev = w.log.Debug()
	}
	ev.Str("component", "http").Msg(msg)
	return len(p), nil
}

// schemes names the listener's URL schemes for the startup line.
func schemes(ts *tlsconf.Server) (web, ws string) {
	if ts == nil {
		return "http", "ws"
	}
	return "https", "wss"
}

// warnPlainHTTP logs when a listener off loopback serves plain HTTP: tokens and task
// payloads would cross the network in the clear unless a TLS proxy fronts it.
func warnPlainHTTP(log zerolog.Logger, name string, ln net.Listener, ts *tlsconf.Server) {
	if ts != nil {
		return
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn().Str("listener", name).Str("addr", a.String()).
			Msg("plain HTTP on a non-loopback address: terminate TLS in front (docs/deployment.md) or set tls_cert and tls_key")
	}
}

// protectedResource is the OAuth protected-resource metadata of the MCP endpoint when JWT
// authentication is configured (docs/security.md); nil otherwise. The authorization servers
// default to the JWT issuer; with neither, nothing can be advertised, and serve says so.
func protectedResource(cfg *config.Config, log zerolog.Logger) (*auth.ProtectedResource, error) {
	if cfg.Auth.JWT == nil {
		return nil, nil
	}
	servers := cfg.OAuthAuthorizationServers
	if len(servers) == 0 && cfg.Auth.JWT.Issuer != "" {
		servers = []string{cfg.Auth.JWT.Issuer}
	}
	if len(servers) == 0 {
		log.Warn().Msg("JWT auth without oauth_authorization_servers or auth.jwt.issuer: no OAuth protected-resource metadata is served, and 401s carry no resource_metadata")
		return nil, nil
	}
	return auth.NewProtectedResource(auth.ProtectedResource{Resource: cfg.OAuthResource,
		AuthorizationServers: servers, Scopes: cfg.OAuthScopes})
}
