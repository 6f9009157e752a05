package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/taskbridge/taskbridge/internal/redact"
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
	// TenantClaim the one holding the tenant (default "tenant"). Both must be non-empty
	// strings when present; an absent tenant claim means no tenant.
	PrincipalClaim string `yaml:"principal_claim"`
	TenantClaim    string `yaml:"tenant_claim"`
	// Refresh is how often a JWKS URL is re-fetched in the background (default 5 min). An
	// unknown kid also triggers a fetch, at most once per 30 s.
	Refresh time.Duration `yaml:"refresh"`
	// Leeway tolerates clock skew on exp/nbf/iat (default 30 s).
	Leeway time.Duration `yaml:"leeway"`
	// HTTPClient fetches JWKSURL (default: a client with a 10 s timeout).
	HTTPClient *http.Client `yaml:"-"`
	// OnRefreshError, when set, hears of every failed background fetch of JWKSURL (the
	// cached keys stay in use). The error names the URL in its redacted form.
	OnRefreshError func(error) `yaml:"-"`
}

// JWT authenticates bearer JWTs. exp is required; alg must be RS256 or ES256 and match
// the key's type.
//
// Keys come from a maintained JWKS cache (github.com/MicahParks/keyfunc/v3 over
// github.com/MicahParks/jwkset): a JWKS URL is fetched at start and then refreshed by one
// background goroutine every Refresh interval, so a request never waits for the identity
// provider; a failed refresh keeps the cached keys. Only a token naming an unknown kid may
// make its request wait for a fetch, at most once per unknownKIDEvery and never longer
// than unknownKIDWait.
//
// Concurrency: safe for concurrent use. Close stops the refresh goroutine.
type JWT struct {
	cfg    JWTConfig
	parser *jwt.Parser
	kf     keyfunc.Keyfunc
	stop   context.CancelFunc
	once   sync.Once
}

// unknownKIDEvery spaces the JWKS fetches that tokens with an unknown kid may cause;
// unknownKIDWait bounds how long such a request waits for its turn and for the fetch.
const (
	unknownKIDEvery = 30 * time.Second
	unknownKIDWait  = 2 * time.Second
)

// fetchTimeout bounds one JWKS fetch (the start-up one and every background refresh).
const fetchTimeout = 10 * time.Second

// NewJWT loads the key set once (so a bad file or URL fails at startup) and, for a URL,
// starts the background refresh.
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
		c.HTTPClient = &http.Client{Timeout: fetchTimeout}
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
	j := &JWT{cfg: c, parser: jwt.NewParser(opts...), stop: func() {}}
	var err error
	if c.JWKSFile != "" {
		j.kf, err = fileKeys(c.JWKSFile)
	} else {
		j.kf, j.stop, err = urlKeys(c)
	}
	if err != nil {
		return nil, err
	}
	if err := j.checkUsable(); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// fileKeys reads a local JWKS once.
func fileKeys(path string) (keyfunc.Keyfunc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: jwks: %w", err)
	}
	kf, err := keyfunc.NewJWKSetJSON(json.RawMessage(data))
	if err != nil {
		return nil, fmt.Errorf("auth: jwks: %s: %w", path, err)
	}
	return keyfunc.New(keyfunc.Options{Storage: kf.Storage(), UseWhitelist: signingUse})
}

// signingUse admits keys for signatures: "use":"sig" or no "use" at all.
var signingUse = []jwkset.USE{jwkset.UseSig, ""}

// urlKeys builds the refreshing cache of a JWKS URL; stop ends its goroutine.
func urlKeys(c JWTConfig) (keyfunc.Keyfunc, context.CancelFunc, error) {
	ctx, stop := context.WithCancel(context.Background())
	where := redact.URL(c.JWKSURL)
	fail := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{c.JWKSURL}, keyfunc.Override{
		Client:                    c.HTTPClient,
		HTTPTimeout:               fetchTimeout,
		NoErrorReturnFirstHTTPReq: &fail, // a JWKS that cannot be fetched at start is a config error
		RefreshInterval:           c.Refresh,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(unknownKIDEvery), 1),
		RateLimitWaitMax:          unknownKIDWait,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				if c.OnRefreshError != nil {
					c.OnRefreshError(fmt.Errorf("auth: jwks %s: %s", where, redact.Error(err)))
				}
			}
		},
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("auth: jwks %s: %s", where, redact.Error(err))
	}
	kf, err = keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: kf.Storage(), UseWhitelist: signingUse})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return kf, stop, nil
}

// checkUsable refuses a key set without one RSA (≥ 2048 bits) or P-256 signing key.
func (j *JWT) checkUsable() error {
	keys, err := j.kf.Storage().KeyReadAll(context.Background())
	if err != nil {
		return fmt.Errorf("auth: jwks: %w", err)
	}
	for _, k := range keys {
		if u := k.Marshal().USE; u != "" && u != jwkset.UseSig {
			continue
		}
		if usableKey(k.Key()) {
			return nil
		}
	}
	return errors.New("auth: jwks: no RSA (2048 bits or more) or P-256 signing keys")
}

// Close stops the background refresh of a JWKS URL. Safe to call twice.
func (j *JWT) Close() error {
	j.once.Do(j.stop)
	return nil
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
	id, err := stringClaim(claims, j.cfg.PrincipalClaim, true)
	if err != nil {
		return Principal{}, err
	}
	tenant, err := stringClaim(claims, j.cfg.TenantClaim, false)
	if err != nil {
		return Principal{}, err
	}
	return Principal{ID: id, Tenant: tenant}, nil
}

// stringClaim reads an identity claim. A claim that is present must be a non-empty
// string: a number, object, array, null or "" is an invalid credential, never "absent"
// (a tenant of 7 or {} must not fall back to no tenant and merge two tenants into one
// owner). An absent claim is an error only when required.
func stringClaim(claims jwt.MapClaims, name string, required bool) (string, error) {
	v, present := claims[name]
	if !present {
		if required {
			return "", fmt.Errorf("%w: jwt: claim %q missing", ErrInvalidCredentials, name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("%w: jwt: claim %q must be a non-empty string", ErrInvalidCredentials, name)
	}
	return s, nil
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

// keyFor returns the jwt.Keyfunc: the cached key named by kid (or the only signing key
// when the token has no kid), of the type its alg needs.
func (j *JWT) keyFor(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		var k any
		if _, hasKID := t.Header["kid"]; hasKID {
			key, err := j.kf.KeyfuncCtx(ctx)(t)
			if err != nil {
				return nil, errors.New("unknown key id")
			}
			k = key
		} else {
			key, err := j.onlyKey(ctx)
			if err != nil {
				return nil, err
			}
			k = key
		}
		if !usableKey(k) {
			return nil, errors.New("key type not accepted")
		}
		switch t.Method.Alg() {
		case "RS256":
			if rk, ok := k.(*rsa.PublicKey); ok {
				return rk, nil
			}
		case "ES256":
			if ek, ok := k.(*ecdsa.PublicKey); ok {
				return ek, nil
			}
		}
		return nil, errors.New("key type does not match alg")
	}
}

// onlyKey is the key of a token without kid: the set's single signing key, if it has one.
func (j *JWT) onlyKey(ctx context.Context) (any, error) {
	set, err := j.kf.VerificationKeySet(ctx)
	if err != nil || len(set.Keys) != 1 {
		return nil, errors.New("token without kid and the key set has more than one key")
	}
	return set.Keys[0], nil
}

// usableKey accepts RSA public keys of 2048 bits or more and P-256 ECDSA public keys.
func usableKey(k any) bool {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return k.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return k.Curve == elliptic.P256()
	}
	return false
}
