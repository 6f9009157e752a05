package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
)

// APIKey is one configured static key and the principal it stands for.
type APIKey struct {
	Key       string `yaml:"key"`
	Principal string `yaml:"principal"`
	Tenant    string `yaml:"tenant"`
}

// APIKeys authenticates "Authorization: Bearer <key>" against a fixed list. Keys are held
// as SHA-256 digests and compared in constant time against every entry (no early exit),
// so neither the position nor a prefix of a valid key leaks through timing.
type APIKeys struct {
	entries []keyEntry
}

type keyEntry struct {
	digest [sha256.Size]byte
	p      Principal
}

// minKeyLen is the shortest key accepted in configuration: 16 characters.
const minKeyLen = 16

// NewAPIKeys validates the list: every key non-trivial and unique, every principal named.
func NewAPIKeys(keys []APIKey) (*APIKeys, error) {
	a := &APIKeys{}
	seen := map[[sha256.Size]byte]bool{}
	for i, k := range keys {
		if len(k.Key) < minKeyLen {
			return nil, fmt.Errorf("auth: api_keys[%d]: key must be at least %d characters", i, minKeyLen)
		}
		if k.Principal == "" {
			return nil, fmt.Errorf("auth: api_keys[%d]: principal is required", i)
		}
		d := sha256.Sum256([]byte(k.Key))
		if seen[d] {
			return nil, fmt.Errorf("auth: api_keys[%d]: duplicate key", i)
		}
		seen[d] = true
		a.entries = append(a.entries, keyEntry{digest: d, p: Principal{ID: k.Principal, Tenant: k.Tenant}})
	}
	if len(a.entries) == 0 {
		return nil, errors.New("auth: api_keys: no keys")
	}
	return a, nil
}

// Authenticate implements Authenticator.
func (a *APIKeys) Authenticate(r *http.Request) (Principal, error) {
	tok, ok := bearer(r)
	if !ok {
		return Principal{}, ErrNoCredentials
	}
	d := sha256.Sum256([]byte(tok))
	found := -1
	for i := range a.entries {
		if subtle.ConstantTimeCompare(d[:], a.entries[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, ErrInvalidCredentials
	}
	return a.entries[found].p, nil
}
