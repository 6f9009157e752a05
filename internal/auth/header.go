package auth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
)

// TrustedHeaderConfig reads the principal from a header set by an authenticating proxy
// (oauth2-proxy, an API gateway). Only requests from the listed proxy addresses are
// believed; anyone else could set the header themselves.
type TrustedHeaderConfig struct {
	// Principal is the header naming the principal, e.g. X-Forwarded-User (required).
	Principal string `yaml:"principal"`
	// Tenant is the header naming the tenant (optional).
	Tenant string `yaml:"tenant"`
	// From lists the proxy addresses or CIDR prefixes (default: loopback only).
	From []string `yaml:"from"`
}

// TrustedHeader authenticates by proxy-set headers.
type TrustedHeader struct {
	principal, tenant string
	from              []netip.Prefix
}

// NewTrustedHeader validates c.
func NewTrustedHeader(c TrustedHeaderConfig) (*TrustedHeader, error) {
	if c.Principal == "" {
		return nil, errors.New("auth: trusted_header: principal header name is required")
	}
	from := c.From
	if len(from) == 0 {
		from = []string{"127.0.0.0/8", "::1/128"}
	}
	h := &TrustedHeader{principal: http.CanonicalHeaderKey(c.Principal), tenant: http.CanonicalHeaderKey(c.Tenant)}
	for _, s := range from {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("auth: trusted_header: from %q: not an address or CIDR prefix", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		h.from = append(h.from, p.Masked())
	}
	return h, nil
}

// Authenticate implements Authenticator.
func (h *TrustedHeader) Authenticate(r *http.Request) (Principal, error) {
	id := r.Header.Get(h.principal)
	if id == "" {
		return Principal{}, ErrNoCredentials
	}
	if !h.trusted(r.RemoteAddr) {
		return Principal{}, fmt.Errorf("%w: %s from an untrusted address", ErrInvalidCredentials, h.principal)
	}
	// One value each: a second header line (one the proxy added, one the caller sent)
	// makes the identity ambiguous, and two readings of it must never exist.
	if len(r.Header.Values(h.principal)) != 1 {
		return Principal{}, fmt.Errorf("%w: %s given more than once", ErrInvalidCredentials, h.principal)
	}
	var tenant string
	if h.tenant != "" {
		if len(r.Header.Values(h.tenant)) > 1 {
			return Principal{}, fmt.Errorf("%w: %s given more than once", ErrInvalidCredentials, h.tenant)
		}
		tenant = r.Header.Get(h.tenant)
	}
	return Principal{ID: id, Tenant: tenant}, nil
}

func (h *TrustedHeader) trusted(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range h.from {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
