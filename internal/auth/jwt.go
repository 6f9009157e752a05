package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig validates bearer JWTs (RS256 or ES256) against a JSON Web Key Set.
type JWTConfig struct {
	// JWKSFile is a local JWKS document; JWKSURL one fetched over HTTP(S) and refreshed.
	// Exactly one is required.
	JWKSFile string `yaml:"jwks_file"`
	JWKSURL  string `yaml:"jwks_url"`
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// PrincipalClaim names the claim holding the principal id (default "sub");
	// TenantClaim the one holding the tenant (default "tenant"; absent means no tenant).
	PrincipalClaim string `yaml:"principal_claim"`
	TenantClaim    string `yaml:"tenant_claim"`
	// Refresh is how often a JWKS URL is re-fetched (default 5 min). An unknown kid also
	// triggers a fetch, at most once per 30 s.
	Refresh time.Duration `yaml:"refresh"`
	// Leeway tolerates clock skew on exp/nbf/iat (default 30 s).
	Leeway time.Duration `yaml:"leeway"`
	// HTTPClient fetches JWKSURL (default: a client with a 10 s timeout).
	HTTPClient *http.Client `yaml:"-"`
}

// JWT authenticates bearer JWTs. exp is required; alg must be RS256 or ES256 and match
// the key's type.
type JWT struct {
	cfg    JWTConfig
	parser *jwt.Parser

	mu        sync.Mutex // guards keys, fetchedAt, lastMiss
	keys      map[string]crypto.PublicKey
	fetchedAt time.Time
	lastMiss  time.Time
}

// minMissRefetch spaces the JWKS fetches an unknown kid may cause.
const minMissRefetch = 30 * time.Second

// NewJWT loads the key set once (so a bad file or URL fails at startup).
func NewJWT(c JWTConfig) (*JWT, error) {
	if (c.JWKSFile == "") == (c.JWKSURL == "") {
		return nil, errors.New("auth: jwt: set exactly one of jwks_file and jwks_url")
	}
	if c.PrincipalClaim == "" {
		c.PrincipalClaim = "sub"
	}
	if c.TenantClaim == "" {
		c.TenantClaim = "tenant"
	}
	if c.Refresh <= 0 {
		c.Refresh = 5 * time.Minute
	}
	if c.Leeway <= 0 {
		c.Leeway = 30 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "ES256"}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(c.Leeway),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	j := &JWT{cfg: c, parser: jwt.NewParser(opts...)}
	if err := j.load(context.Background()); err != nil {
		return nil, err
	}
	return j, nil
}

// Authenticate implements Authenticator.
func (j *JWT) Authenticate(r *http.Request) (Principal, error) {
	tok, ok := bearer(r)
	if !ok || strings.Count(tok, ".") != 2 {
		return Principal{}, ErrNoCredentials // not a JWT: maybe an API key for another method
	}
	claims := jwt.MapClaims{}
	if _, err := j.parser.ParseWithClaims(tok, claims, j.keyFor(r.Context())); err != nil {
		return Principal{}, fmt.Errorf("%w: jwt: %s", ErrInvalidCredentials, jwtReason(err))
	}
	id, _ := claims[j.cfg.PrincipalClaim].(string)
	if id == "" {
		return Principal{}, fmt.Errorf("%w: jwt: claim %q missing", ErrInvalidCredentials, j.cfg.PrincipalClaim)
	}
	tenant, _ := claims[j.cfg.TenantClaim].(string)
	return Principal{ID: id, Tenant: tenant}, nil
}

// jwtReason names the class of a validation failure without echoing token contents.
func jwtReason(err error) string {
	for _, e := range []error{jwt.ErrTokenExpired, jwt.ErrTokenNotValidYet, jwt.ErrTokenSignatureInvalid,
		jwt.ErrTokenInvalidIssuer, jwt.ErrTokenInvalidAudience, jwt.ErrTokenMalformed,
		jwt.ErrTokenUnverifiable, jwt.ErrTokenRequiredClaimMissing} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "invalid token"
}

// keyFor returns the jwt.Keyfunc: the key named by kid (or the only key when the token
// has no kid), of the type its alg needs.
func (j *JWT) keyFor(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, err := j.lookup(ctx, kid)
		if err != nil {
			return nil, err
		}
		switch t.Method.Alg() {
		case "RS256":
			if rk, ok := k.(*rsa.PublicKey); ok {
				return rk, nil
			}
		case "ES256":
			if ek, ok := k.(*ecdsa.PublicKey); ok && ek.Curve == elliptic.P256() {
				return ek, nil
			}
		}
		return nil, errors.New("key type does not match alg")
	}
}

func (j *JWT) lookup(ctx context.Context, kid string) (crypto.PublicKey, error) {
	j.mu.Lock()
	stale := j.cfg.JWKSURL != "" && time.Since(j.fetchedAt) > j.cfg.Refresh
	k, ok := j.pick(kid)
	miss := !ok && j.cfg.JWKSURL != "" && time.Since(j.lastMiss) > minMissRefetch
	if miss {
		j.lastMiss = time.Now()
	}
	j.mu.Unlock()
	if ok && !stale {
		return k, nil
	}
	if stale || miss {
		if err := j.load(ctx); err != nil && !ok {
			return nil, err
		}
		j.mu.Lock()
		k, ok = j.pick(kid)
		j.mu.Unlock()
	}
	if !ok {
		return nil, errors.New("unknown key id")
	}
	return k, nil
}

// pick finds a key; j.mu must be held.
func (j *JWT) pick(kid string) (crypto.PublicKey, bool) {
	if kid == "" {
		if len(j.keys) == 1 {
			for _, k := range j.keys {
				return k, true
			}
		}
		return nil, false
	}
	k, ok := j.keys[kid]
	return k, ok
}

// load reads the JWKS from its file or URL and swaps it in.
func (j *JWT) load(ctx context.Context) error {
	var data []byte
	var err error
	if j.cfg.JWKSFile != "" {
		data, err = os.ReadFile(j.cfg.JWKSFile)
	} else {
		data, err = j.fetch(ctx)
	}
	if err != nil {
		return fmt.Errorf("auth: jwks: %w", err)
	}
	keys, err := ParseJWKS(data)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.keys, j.fetchedAt = keys, time.Now()
	j.mu.Unlock()
	return nil
}

func (j *JWT) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.cfg.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", j.cfg.JWKSURL, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// jwk is one JSON Web Key (RFC 7517/7518), the members taskbridge reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS reads the RSA and P-256 EC signing keys of a JWKS document, by kid. Keys of
// other types or for encryption ("use":"enc") are skipped; a set with no usable key is an
// error.
func ParseJWKS(data []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("auth: jwks: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			pub, err = rsaKey(k)
		case "EC":
			pub, err = ecKey(k)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("auth: jwks: keys[%d]: %w", i, err)
		}
		out[k.Kid] = pub
	}
	if len(out) == 0 {
		return nil, errors.New("auth: jwks: no RSA or P-256 signing keys")
	}
	return out, nil
}

func b64int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(b) == 0 {
		return nil, errors.New("bad base64url integer")
	}
	return new(big.Int).SetBytes(b), nil
}

func rsaKey(k jwk) (*rsa.PublicKey, error) {
	n, err := b64int(k.N)
	if err != nil {
		return nil, fmt.Errorf("n: %w", err)
	}
	e, err := b64int(k.E)
	if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 {
		return nil, errors.New("e: bad exponent")
	}
	if n.BitLen() < 2048 {
		return nil, errors.New("RSA key shorter than 2048 bits")
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	if k.Crv != "P-256" {
		return nil, fmt.Errorf("curve %q not supported (P-256 only)", k.Crv)
	}
	x, err := b64int(k.X)
	if err != nil {
		return nil, fmt.Errorf("x: %w", err)
	}
	y, err := b64int(k.Y)
	if err != nil {
		return nil, fmt.Errorf("y: %w", err)
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}
	if !pub.Curve.IsOnCurve(x, y) { //nolint:staticcheck // validating untrusted input
		return nil, errors.New("point not on curve")
	}
	return pub, nil
}
