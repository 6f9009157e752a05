// Package pending is the routes' one registry of requests waiting on something: a
// server→client request waiting for the client's answer (keyed by the id the bridge
// issued), an in-flight call that notifications/cancelled may cancel (keyed by session and
// request id, Key), a held MRTR call waiting for the client's retry (keyed by its
// requestState).
package pending

import "sync"

// Registry maps keys to waiting values. The zero value is ready to use. Safe for
// concurrent use: every method takes the one lock, and none calls out while holding it.
type Registry[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Key is the key of a request within a session: "session\x00requestID".
func Key(session, requestID string) string { return session + "\x00" + requestID }

// Put registers v under key (replacing what was there) and returns the func that removes
// it again, unless another Put replaced it meanwhile (same is how values are compared).
func (r *Registry[T]) Put(key string, v T, same func(a, b T) bool) (remove func()) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[key] = v
	r.mu.Unlock()
	return func() { r.DeleteIf(key, func(cur T) bool { return same(cur, v) }) }
}

// Get returns the value under key.
func (r *Registry[T]) Get(key string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	return v, ok
}

// TakeIf removes and returns the value under key when ok accepts it; found reports
// whether there was one at all (taken or not).
func (r *Registry[T]) TakeIf(key string, ok func(T) bool) (v T, found, taken bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, found = r.m[key]
	if found && ok(v) {
		delete(r.m, key)
		return v, true, true
	}
	return v, found, false
}

// DeleteIf removes the value under key when match accepts it.
func (r *Registry[T]) DeleteIf(key string, match func(T) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m[key]; ok && match(v) {
		delete(r.m, key)
	}
}

// Delete removes the value under key.
func (r *Registry[T]) Delete(key string) {
	r.mu.Lock()
	delete(r.m, key)
	r.mu.Unlock()
}

// Keys returns the keys registered now, in no particular order.
func (r *Registry[T]) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.m))
	for k := range r.m {
		keys = append(keys, k)
	}
	return keys
}
