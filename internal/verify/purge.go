package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// purgeAfterRetention: a finished 2025-11-25 task's record loses its payload once its ttl
// has passed and is deleted once ttl + retention have. A run cannot wait out a real ttl
// and retention, so the bridge's own purge (store.PurgeExpired with the configured
// retention, what the purge loop runs every purge_interval) is run with its clock set just
// past each point; the store is the run's temporary one.
func (r *run) purgeAfterRetention(ctx context.Context, t *Tool) (Result, string) {
	switch {
	case t == nil:
		return Skipped, noTaskTool
	case r.o.Store == nil:
		return Skipped, "the bridge's store is not available"
	}
	c, id, err := r.startLegacy(ctx, *t)
	if err != nil {
		return Fail, err.Error()
	}
	if _, err := waitLegacy(ctx, c, id, &trail{}); err != nil {
		return Fail, err.Error()
	}
	rec, err := r.o.Store.GetTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Skipped, "the 2025-11-25 face passes through: its tasks are the upstream's, with no record in the bridge's store"
	}
	if err != nil {
		return Fail, "the finished task's record: " + err.Error()
	}
	exp, ok := rec.ExpiresAt()
	if !ok {
		return Skipped, "the task has no ttl (never purged)"
	}
	ttl := exp.Sub(rec.CreatedAt).Round(time.Second)
	if len(rec.Result) == 0 && len(rec.Error) == 0 {
		return Fail, "the finished task's record holds no result before its ttl"
	}
	if _, _, err := r.o.Store.PurgeExpired(ctx, exp.Add(-time.Second), r.o.Retention); err != nil {
		return Fail, "purge: " + err.Error()
	}
	if rec, err = r.o.Store.GetTask(ctx, id); err != nil || len(rec.Result)+len(rec.Error) == 0 {
		return Fail, fmt.Sprintf("a purge before the ttl took the record or its payload (%v)", err)
	}
	if _, _, err := r.o.Store.PurgeExpired(ctx, exp.Add(time.Millisecond), r.o.Retention); err != nil {
		return Fail, "purge: " + err.Error()
	}
	rec, err = r.o.Store.GetTask(ctx, id)
	if r.o.Retention > 0 {
		if err != nil {
			return Fail, "the record went at its ttl, before the retention (" + r.o.Retention.String() + "): " + err.Error()
		}
		if len(rec.Result)+len(rec.Error) != 0 || rec.StatusMessage != "" {
			return Fail, "the payload outlived the ttl"
		}
		if rec.Owner == "" || rec.Tool == "" {
			return Fail, "the audit part (owner, tool) went with the payload"
		}
	}
	if _, _, err := r.o.Store.PurgeExpired(ctx, exp.Add(r.o.Retention+time.Millisecond), r.o.Retention); err != nil {
		return Fail, "purge: " + err.Error()
	}
	if _, err := r.o.Store.GetTask(ctx, id); !errors.Is(err, store.ErrNotFound) {
		return Fail, fmt.Sprintf("the record is still there after ttl + retention (%s): %v", r.o.Retention, err)
	}
	return Pass, fmt.Sprintf("ttl %s: payload purged, audit part kept; deleted after ttl + retention %s (the store's purge, clock set past each point)", ttl, r.o.Retention)
}
