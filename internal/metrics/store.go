package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// InstrumentStore returns st with the latency of its operations recorded in
// taskbridge_store_operation_duration_seconds. Methods not listed here (added to the
// interface later) pass through the embedded Store untimed. A nil Metrics returns st.
func (m *Metrics) InstrumentStore(st store.Store) store.Store {
	if m == nil || st == nil {
		return st
	}
	return &timedStore{Store: st, m: m}
}

// Unwrap returns the store an instrumented store wraps (st itself otherwise), for callers
// that need an implementation's extra methods.
func Unwrap(st store.Store) store.Store {
	if t, ok := st.(*timedStore); ok {
		return t.Store
	}
	return st
}

type timedStore struct {
	store.Store
	m *Metrics
}

func (s *timedStore) obs(op string, start time.Time, err error) {
	s.m.Store(op, err, time.Since(start))
}

func (s *timedStore) CreateSession(ctx context.Context, se *record.Session) error {
	start := time.Now()
	err := s.Store.CreateSession(ctx, se)
	s.obs("create_session", start, err)
	return err
}

func (s *timedStore) GetSession(ctx context.Context, id string) (*record.Session, error) {
	start := time.Now()
	se, err := s.Store.GetSession(ctx, id)
	s.obs("get_session", start, notFoundOK(err))
	return se, err
}

func (s *timedStore) TouchSession(ctx context.Context, id string, at time.Time) error {
	start := time.Now()
	err := s.Store.TouchSession(ctx, id, at)
	s.obs("touch_session", start, notFoundOK(err))
	return err
}

func (s *timedStore) CreateTask(ctx context.Context, t *record.Task) error {
	start := time.Now()
	err := s.Store.CreateTask(ctx, t)
	s.obs("create_task", start, err)
	return err
}

func (s *timedStore) GetTask(ctx context.Context, id string) (*record.Task, error) {
	start := time.Now()
	t, err := s.Store.GetTask(ctx, id)
	s.obs("get_task", start, notFoundOK(err))
	return t, err
}

func (s *timedStore) FindTaskByRequest(ctx context.Context, sessionID, requestID string) (*record.Task, error) {
	start := time.Now()
	t, err := s.Store.FindTaskByRequest(ctx, sessionID, requestID)
	s.obs("find_task", start, notFoundOK(err))
	return t, err
}

func (s *timedStore) UpdateTask(ctx context.Context, t *record.Task) error {
	start := time.Now()
	err := s.Store.UpdateTask(ctx, t)
	s.obs("update_task", start, err)
	return err
}

func (s *timedStore) ListTasks(ctx context.Context, owner string, after *store.Cursor, limit int) ([]*record.Task, error) {
	start := time.Now()
	ts, err := s.Store.ListTasks(ctx, owner, after, limit)
	s.obs("list_tasks", start, err)
	return ts, err
}

func (s *timedStore) ListInputs(ctx context.Context, taskID string) ([]record.Input, error) {
	start := time.Now()
	in, err := s.Store.ListInputs(ctx, taskID)
	s.obs("list_inputs", start, err)
	return in, err
}

func (s *timedStore) AnswerInput(ctx context.Context, taskID, key string, resp json.RawMessage, at time.Time) (bool, error) {
	start := time.Now()
	first, err := s.Store.AnswerInput(ctx, taskID, key, resp, at)
	s.obs("answer_input", start, err)
	return first, err
}

func (s *timedStore) Ping(ctx context.Context) error {
	start := time.Now()
	err := s.Store.Ping(ctx)
	s.obs("ping", start, err)
	return err
}

func (s *timedStore) CheckWritable(ctx context.Context) error {
	start := time.Now()
	err := s.Store.CheckWritable(ctx)
	s.obs("check_writable", start, err)
	return err
}

// notFoundOK treats ErrNotFound as an answer, not a store failure.
func notFoundOK(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
