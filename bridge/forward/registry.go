package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// registry is the forward route's records in one place: the store (the truth, shared by
// every replica), the trackers of the tasks this process watches, the cache of finished
// records, and the one compare-and-swap write path (update), which caps results, announces
// each change to the other replicas and caches finished records. Every store call of the
// route goes through it; nothing else holds the store.
//
// Concurrency: safe for concurrent use. mu guards trackers and is never held while calling
// out (only a tracker's own lock is taken under it, never the other way round).
type registry struct {
	st        store.Store
	now       func() time.Time
	maxResult int64         // Config.MaxResultBytes
	timeout   time.Duration // bounds one announcement to the other replicas
	log       *zerolog.Logger
	peers     *peers // cross-replica events (replica.go); nil for a single-process store
	terminal  *terminalCache

	mu       sync.Mutex
	trackers map[string]*tracker // non-terminal (or outcome-pending) tasks watched here, by id
}

func newRegistry(cfg Config, log *zerolog.Logger) *registry {
	return &registry{st: cfg.Store, now: cfg.Now, maxResult: cfg.MaxResultBytes, timeout: cfg.StatusTimeout,
		log: log, peers: newPeers(cfg.Store), terminal: newTerminalCache(), trackers: map[string]*tracker{}}
}

// ---- trackers --------------------------------------------------------------------------

// tracker returns the tracker of task id, or nil.
func (r *registry) tracker(id string) *tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trackers[id]
}

// putTracker registers t (Bridge.track decides, under the Bridge's lock, that it is new).
func (r *registry) putTracker(t *tracker) {
	r.mu.Lock()
	r.trackers[t.id] = t
	r.mu.Unlock()
}

// dropTracker forgets t, unless another tracker replaced it.
func (r *registry) dropTracker(t *tracker) {
	r.mu.Lock()
	if r.trackers[t.id] == t {
		delete(r.trackers, t.id)
	}
	r.mu.Unlock()
}

// allTrackers is a copy of the trackers, to be read without the registry's lock.
func (r *registry) allTrackers() []*tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := make([]*tracker, 0, len(r.trackers))
	for _, t := range r.trackers {
		ts = append(ts, t)
	}
	return ts
}

// byUpstream finds the tracker watching an upstream task id.
func (r *registry) byUpstream(upstreamID string) *tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.trackers {
		t.mu.Lock()
		match := t.rec.UpstreamTaskID == upstreamID
		t.mu.Unlock()
		if match {
			return t
		}
	}
	return nil
}

// upstreamIDs returns the sorted upstream ids of the tasks tracked here.
func (r *registry) upstreamIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.trackers))
	for _, t := range r.trackers {
		t.mu.Lock()
		if id := t.rec.UpstreamTaskID; id != "" {
			ids = append(ids, id)
		}
		t.mu.Unlock()
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ---- task records ----------------------------------------------------------------------

// fresh returns the freshest copy of a record this process has: a live tracker's, the
// terminal cache's (without payload), or the store's.
func (r *registry) fresh(ctx context.Context, id string) (*record.Task, error) {
	t := r.tracker(id)
	if t != nil && r.peers != nil {
		// Replicas: another one may have changed the record (a cancel) a moment ago and its
		// event not have arrived yet; the store is the truth (read-your-writes across
		// replicas). The tracker adopts what is newer.
		if rec, err := r.st.GetTask(ctx, id); err == nil {
			t.adopt(rec)
		}
	}
	if t != nil {
		return t.snapshot(), nil
	}
	if rec, ok := r.terminal.Get(id); ok {
		c := *rec
		return &c, nil
	}
	rec, err := r.st.GetTask(ctx, id)
	if err != nil {
		return nil, err
	}
	r.cacheFinished(rec)
	return rec, nil
}

// cacheFinished keeps a payload-free copy of a finished record in memory.
func (r *registry) cacheFinished(rec *record.Task) {
	if finished(rec) {
		c := *rec
		r.terminal.Add(rec.ID, &c)
	}
}

// get reads a record from the store.
func (r *registry) get(ctx context.Context, id string) (*record.Task, error) {
	return r.st.GetTask(ctx, id)
}

// create inserts a new record (store.ErrConflict for a taken id, key or request id).
func (r *registry) create(ctx context.Context, rec *record.Task) error {
	return r.st.CreateTask(ctx, rec)
}

// write stores rec as it is (compare-and-swap on its version), for a record only this
// call has seen so far (the create path).
func (r *registry) write(ctx context.Context, rec *record.Task) error {
	return r.st.UpdateTask(ctx, rec)
}

// update applies fn to a record with compare-and-swap, re-reading on conflict; fn returns
// false to leave the record as it is. A written record is capped (capResult), announced to
// the other replicas, and cached when finished.
func (r *registry) update(ctx context.Context, rec *record.Task, fn func(*record.Task) bool) (*record.Task, error) {
	for range 8 {
		c := *rec
		if !fn(&c) {
			return &c, nil
		}
		r.capResult(&c)
		err := r.st.UpdateTask(ctx, &c)
		if err == nil {
			r.announce(ctx, &c, c.Status != rec.Status)
			r.cacheFinished(&c)
			return &c, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
		if rec, err = r.st.GetTask(ctx, rec.ID); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("task %s: too many concurrent updates", rec.ID)
}

// capResult enforces MaxResultBytes on a record about to be written (per-principal limits,
// design §7: the request rate is the front door's, concurrent unfinished tasks and upstream
// backpressure the work gate's, the result size this one; none of them queues work): a result or error
// larger than the cap is dropped and the task fails with a clear error. The real outcome
// (the operation may well have succeeded) is kept.
func (r *registry) capResult(rec *record.Task) {
	limit := r.maxResult
	n := int64(max(len(rec.Result), len(rec.Error)))
	if limit <= 0 || n <= limit {
		return
	}
	msg := fmt.Sprintf("The result (%d bytes) exceeds the bridge's limit of %d bytes; it was not kept.", n, limit)
	rec.Result = nil
	rec.Status = record.StatusFailed
	rec.StatusMessage = msg
	rec.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeInternalError, msg).
		WithData(map[string]any{"retryable": false, "outcome": string(rec.Outcome), "limit": "maxResultBytes"}))
}

func (r *registry) findByKey(ctx context.Context, owner, key string) (*record.Task, error) {
	return r.st.FindTaskByIdempotencyKey(ctx, owner, key)
}

func (r *registry) findByRequest(ctx context.Context, sessionID, requestID string) (*record.Task, error) {
	return r.st.FindTaskByRequest(ctx, sessionID, requestID)
}

func (r *registry) releaseRequestID(ctx context.Context, id, requestID string) error {
	return r.st.ReleaseRequestID(ctx, id, requestID)
}

func (r *registry) releaseKey(ctx context.Context, id string) error {
	return r.st.ReleaseIdempotencyKey(ctx, id)
}

// list is one page of owner's records, newest first, strictly after the cursor.
func (r *registry) list(ctx context.Context, owner string, after *store.Cursor, limit int) ([]*record.Task, error) {
	return r.st.ListTasks(ctx, owner, after, limit)
}

func (r *registry) listActive(ctx context.Context) ([]*record.Task, error) {
	return r.st.ListActive(ctx)
}

func (r *registry) listUnsettled(ctx context.Context) ([]*record.Task, error) {
	return r.st.ListUnsettled(ctx)
}

func (r *registry) countActive(ctx context.Context, owner string) (int, error) {
	return r.st.CountActive(ctx, owner)
}

// purge applies the ttl (payloads go, the audit part stays for retention) and deletes the
// sessions last seen before sessionsBefore.
func (r *registry) purge(ctx context.Context, retention time.Duration, sessionsBefore time.Time) (purged, deleted, sessionsGone int, err error) {
	if purged, deleted, err = r.st.PurgeExpired(ctx, r.now(), retention); err != nil {
		return 0, 0, 0, fmt.Errorf("ttl purge: %w", err)
	}
	if sessionsGone, err = r.st.PurgeSessions(ctx, sessionsBefore); err != nil {
		return purged, deleted, 0, fmt.Errorf("session purge: %w", err)
	}
	return purged, deleted, sessionsGone, nil
}

// session loads a session record as the face sees it (an unknown one comes back with only
// its id: its envelope then carries no clientInfo, and capabilities default to the tasks
// extension only).
func (r *registry) session(ctx context.Context, id string) (*legacy.Session, error) {
	s, err := r.st.GetSession(ctx, id)
	if err != nil {
		return &legacy.Session{ID: id}, err
	}
	return sessions.FromRecord(s), nil
}

// ---- input requests --------------------------------------------------------------------

func (r *registry) putInputs(ctx context.Context, in []record.Input) error {
	return r.st.PutInputs(ctx, in)
}

func (r *registry) listInputs(ctx context.Context, taskID string) ([]record.Input, error) {
	return r.st.ListInputs(ctx, taskID)
}

func (r *registry) findInput(ctx context.Context, requestID string) (*record.Input, error) {
	return r.st.FindInputByRequestID(ctx, requestID)
}

func (r *registry) answerInput(ctx context.Context, taskID, key string, resp json.RawMessage) (bool, error) {
	return r.st.AnswerInput(ctx, taskID, key, resp, r.now())
}

func (r *registry) markForwarded(ctx context.Context, taskID, key string) error {
	return r.st.MarkInputForwarded(ctx, taskID, key, r.now())
}

func (r *registry) markDelivered(ctx context.Context, taskID, key, requestID string) error {
	return r.st.MarkInputDelivered(ctx, taskID, key, requestID, r.now())
}

// ---- events to the other replicas (replica.go) -----------------------------------------

// announce tells the other replicas that rec changed. Best effort: a failure is logged.
func (r *registry) announce(ctx context.Context, rec *record.Task, statusChanged bool) {
	if r.peers == nil {
		return
	}
	flag := "0"
	if statusChanged {
		flag = "1"
	}
	r.notifyPeers(ctx, "t "+rec.ID+" "+flag, rec.ID)
}

// announceAnswer tells the other replicas that an input of a task was answered.
func (r *registry) announceAnswer(ctx context.Context, taskID, key string) {
	if r.peers == nil || strings.ContainsAny(key, " \n") || len(key) > 1024 {
		return
	}
	r.notifyPeers(ctx, "i "+taskID+" "+key, taskID)
}

func (r *registry) notifyPeers(ctx context.Context, event, taskID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	if err := r.peers.sh.Notify(cctx, notifyChannel, r.peers.self+" "+event); err != nil {
		r.log.Warn().Err(err).Str("task", taskID).Msg("notify peers failed")
	}
}
