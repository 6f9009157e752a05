package forward

import (
	"context"
	"encoding/json"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// The registry's share of what replicas coordinate through (store.Shared, replica.go):
// MRTR asks, poll leases and input carriers, and the events that tell other replicas
// about them. Without peers (a single-process store) every method is a no-op that answers
// as a lone replica would: the lease and every claim are this process's.
//
// A failing store never stops the route: a lease or a claim that cannot be read counts as
// held (a duplicate poll or delivery beats a task nobody watches or an input nobody
// sends), and an ask that cannot be stored can still be answered on this replica.

// putAsk stores an MRTR ask this process waits on.
func (r *registry) putAsk(ctx context.Context, a *store.Ask) error {
	if r.peers == nil {
		return nil
	}
	a.Holder = r.peers.self
	return r.peers.sh.PutAsk(ctx, a)
}

// getAsk reads a stored ask; store.ErrNotFound without peers.
func (r *registry) getAsk(ctx context.Context, requestID string) (*store.Ask, error) {
	if r.peers == nil {
		return nil, store.ErrNotFound
	}
	return r.peers.sh.GetAsk(ctx, requestID)
}

// answerAsk stores the first answer to an ask and tells its holder.
func (r *registry) answerAsk(ctx context.Context, requestID string, resp json.RawMessage) (bool, error) {
	first, err := r.peers.sh.AnswerAsk(ctx, requestID, resp, r.now())
	if err == nil && first {
		r.notifyPeers(ctx, "a "+requestID+" -", "")
	}
	return first, err
}

// deleteAsk forgets an ask once its call stopped waiting (best effort: the purge takes
// what is left after it expired).
func (r *registry) deleteAsk(ctx context.Context, requestID string) {
	if r.peers == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	_ = r.peers.sh.DeleteAsk(cctx, requestID)
}

// pollLeaseName is the lease of polling one upstream task, by the bridge's task id.
func pollLeaseName(taskID string) string { return "poll:" + taskID }

// takePollLease takes or renews the lease of polling taskID's upstream task for ttl;
// true when this process may poll now.
func (r *registry) takePollLease(ctx context.Context, taskID string, ttl time.Duration) bool {
	if r.peers == nil {
		return true
	}
	held, err := r.peers.sh.TakeLease(ctx, pollLeaseName(taskID), r.peers.self, ttl)
	if err != nil {
		r.log.Warn().Err(err).Str("task", taskID).Msg("poll lease unreadable; polling anyway")
		return true
	}
	return held
}

// releasePollLease lets another replica poll taskID at once (this one stops watching it).
func (r *registry) releasePollLease(taskID string) {
	if r.peers == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	_ = r.peers.sh.ReleaseLease(ctx, pollLeaseName(taskID), r.peers.self)
}

// claimInput makes this process the one deliverer of an unanswered input for ttl; true
// when it is (always without peers).
func (r *registry) claimInput(ctx context.Context, taskID, key string, ttl time.Duration) bool {
	if r.peers == nil {
		return true
	}
	ok, err := r.peers.sh.ClaimInput(ctx, taskID, key, r.peers.self, ttl)
	if err != nil {
		r.log.Warn().Err(err).Str("task", taskID).Msg("input claim unreadable; delivering anyway")
		return true
	}
	return ok
}

// releaseInput gives up this process's claim on an input.
func (r *registry) releaseInput(ctx context.Context, taskID, key string) {
	if r.peers == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	_ = r.peers.sh.ReleaseInput(cctx, taskID, key, r.peers.self)
}

// announceDeliver tells the other replicas that inputs of taskID wait for a carrier.
func (r *registry) announceDeliver(ctx context.Context, taskID string) {
	if r.peers == nil {
		return
	}
	r.notifyPeers(ctx, "d "+taskID+" -", taskID)
}

// purgeShared deletes what no replica needs any more (store.PurgeShared); 0 without peers.
func (r *registry) purgeShared(ctx context.Context, streamIdle time.Duration) (int, error) {
	if r.peers == nil {
		return 0, nil
	}
	return r.peers.sh.PurgeShared(ctx, r.now(), streamIdle)
}
