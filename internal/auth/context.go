package auth

import "context"

// The principal of a request travels in its context, from the one place that
// authenticates (the front door, bridge/door.go) to every face and route behind it, which
// never authenticate themselves.

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the caller the front door admitted.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put in ctx; ok is false when there is
// none (single-user mode: no authentication is configured).
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// KeyFrom is the Key of ctx's principal, "" when there is none: the identity sessions and
// tasks are bound to.
func KeyFrom(ctx context.Context) string {
	if p, ok := PrincipalFrom(ctx); ok {
		return p.Key()
	}
	return ""
}
