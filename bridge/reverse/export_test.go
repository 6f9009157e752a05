package reverse

import (
	"context"

	"github.com/taskbridge/taskbridge/legacy"
)

// PooledSession is r's upstream session of anonymous callers, for tests that end it
// behind the bridge's back.
func PooledSession(ctx context.Context, r *Reverse) (*legacy.UpstreamSession, error) {
	return r.pool.Get(ctx, anonymousPool)
}

// UpstreamURL is r's upstream endpoint.
func UpstreamURL(r *Reverse) string { return r.up.URL() }

// UpstreamTaskID is the upstream's id of the bridge task id ("" when unknown).
func UpstreamTaskID(r *Reverse, id string) string {
	rec, err := r.st.GetTask(context.Background(), id)
	if err != nil {
		return ""
	}
	return rec.UpstreamTaskID
}

// ClientCaps is the capability set recorded for the bridge task id ("" when unknown).
func ClientCaps(r *Reverse, id string) string {
	rec, err := r.st.GetTask(context.Background(), id)
	if err != nil {
		return ""
	}
	return rec.ClientCaps
}
