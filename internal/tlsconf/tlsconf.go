// Package tlsconf builds taskbridge's TLS configurations from PEM files: the server side of
// the MCP and admin listeners (a certificate pair, optionally client certificates verified
// against a CA bundle: mTLS) and the client side towards an HTTPS upstream (a private CA
// bundle, optionally a client certificate).
//
// Files are re-read by Reload (taskbridge serve calls it on SIGHUP), so certificates can be
// renewed without a restart. A reload that fails keeps what was loaded before: a renewal
// written halfway, or a key that does not match, never takes a listener down.
//
// Concurrency: every type is safe for concurrent use; handshakes read the current
// configuration through an atomic pointer while Reload swaps it.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// minVersion is the lowest protocol version offered or accepted.
const minVersion = tls.VersionTLS12

// Pair is a certificate and its private key, loaded from two PEM files and re-read by Reload.
type Pair struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadPair loads the certificate chain in certFile and the key in keyFile.
func LoadPair(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload re-reads both files. On error the pair loaded before stays in use.
func (p *Pair) Reload() error {
	c, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return fmt.Errorf("tls: certificate %s with key %s: %w", p.certFile, p.keyFile, err)
	}
	p.cur.Store(&c)
	return nil
}

// Current returns the certificate in use.
func (p *Pair) Current() *tls.Certificate { return p.cur.Load() }

// GetCertificate serves the current certificate to every handshake (tls.Config.GetCertificate).
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.cur.Load(), nil
}

// GetClientCertificate presents the current certificate to a server that asks for one
// (tls.Config.GetClientCertificate).
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.cur.Load(), nil
}

// LoadPool reads a PEM bundle of CA certificates. A file without a single certificate is an
// error (an empty pool would refuse every peer, silently).
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA bundle %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// Server is the TLS side of one listener: a Pair and, for mTLS, the CA bundle that client
// certificates must chain to.
type Server struct {
	pair   *Pair
	caFile string
	cur    atomic.Pointer[tls.Config] // the configuration of new handshakes
}

// NewServer loads certFile and keyFile and, when clientCAFile is not empty, requires every
// client to present a certificate issued by a CA in that bundle.
func NewServer(certFile, keyFile, clientCAFile string) (*Server, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: a certificate and a key are both required")
	}
	pair, err := LoadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	s := &Server{pair: pair, caFile: clientCAFile}
	cfg, err := s.build()
	if err != nil {
		return nil, err
	}
	s.cur.Store(cfg)
	return s, nil
}

// build makes the per-handshake configuration from the current pair and a fresh read of
// the client CA bundle.
func (s *Server) build() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: minVersion, GetCertificate: s.pair.GetCertificate,
		NextProtos: []string{"h2", "http/1.1"}}
	if s.caFile != "" {
		pool, err := LoadPool(s.caFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Config returns the listener's tls.Config. Each handshake uses what the last successful
// Reload loaded.
func (s *Server) Config() *tls.Config {
	return &tls.Config{MinVersion: minVersion, NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.cur.Load(), nil }}
}

// MutualTLS reports whether client certificates are required.
func (s *Server) MutualTLS() bool { return s.caFile != "" }

// Reload re-reads the certificate pair and the client CA bundle. Either failing keeps both
// as they were.
func (s *Server) Reload() error {
	old := s.pair.Current()
	if err := s.pair.Reload(); err != nil {
		return err
	}
	cfg, err := s.build()
	if err != nil {
		s.pair.cur.Store(old)
		return err
	}
	s.cur.Store(cfg)
	return nil
}

// Client is the TLS side of the upstream client: a private CA bundle instead of the system
// roots, and a client certificate for an upstream that asks for one. Reload re-reads the
// client certificate; the CA bundle is read once, at start (the standard verifier keeps its
// roots for the life of a tls.Config, and re-implementing verification to swap them is not
// worth the risk).
type Client struct {
	pair *Pair // nil without a client certificate
	pool *x509.CertPool
}

// NewClient loads caFile (empty: the system roots) and the client pair (both empty: none).
func NewClient(caFile, certFile, keyFile string) (*Client, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs both the certificate and the key")
	}
	c := &Client{}
	if certFile != "" {
		p, err := LoadPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.pair = p
	}
	if caFile != "" {
		pool, err := LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		c.pool = pool
	}
	return c, nil
}

// Config returns the tls.Config for an http.Transport.
func (c *Client) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: minVersion, RootCAs: c.pool}
	if c.pair != nil {
		cfg.GetClientCertificate = c.pair.GetClientCertificate
	}
	return cfg
}

// Reload re-reads the client certificate (a no-op without one); on error the previous one
// stays in use.
func (c *Client) Reload() error {
	if c.pair == nil {
		return nil
	}
	return c.pair.Reload()
}
