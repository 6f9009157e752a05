package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
)

// Listen timing. Variables so tests can shorten them.
var (
	// listenIdle is how long Listen waits for a notification before it pings the
	// connection, so a dead peer is noticed even when TCP keepalive is slow to tell.
	listenIdle = 30 * time.Second
	// listenBackoffMin and listenBackoffMax bound the wait between reconnection attempts.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen subscribes to channel with LISTEN and calls fn with the payload of each
// notification, on the calling goroutine, until ctx is done or the store is closed; it then
// returns nil. fn must return quickly: notifications wait while it runs.
//
// fn("") means "subscribed": it is called once the subscription is in place, and again
// after every reconnection. PostgreSQL delivers a notification only to sessions listening
// when it is sent, so notifications sent while the connection was down are lost; on fn("")
// the caller re-reads whatever state it follows from the store. (Notify refuses an empty
// payload, so "" never comes from a sender.)
//
// Reconnection: Listen holds its own connection, outside the pool. When that connection
// fails (or does not answer a ping after listenIdle without notifications), Listen
// reconnects with jittered exponential backoff from 100ms to 5s, forever, until ctx is done. Only a
// failure of the first subscription is returned, so a bad channel or unreachable database
// shows up at startup.
func (s *Store) Listen(ctx context.Context, channel string, fn func(payload string)) error {
	if channel == "" {
		return errors.New("postgres: listen: empty channel name")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.listeners.Add(1)
	s.mu.Unlock()
	defer s.listeners.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.done, cancel)()

	conn, err := s.subscribe(ctx, channel)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen %s: %w", channel, err)
	}
	for {
		fn("")
		receive(ctx, conn, fn)
		closeConn(conn)
		if conn = s.resubscribe(ctx, channel); conn == nil {
			return nil // ctx done
		}
	}
}

// subscribe opens a connection with the pool's settings and runs LISTEN on it.
func (s *Store) subscribe(ctx context.Context, channel string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// resubscribe retries subscribe with backoff (cenkalti/backoff/v5: doubling from
// listenBackoffMin to listenBackoffMax, jittered ±20% within them, so replicas that lost
// the database together do not reconnect in step) until it succeeds or ctx is done (nil).
// It waits before the first attempt: a database that accepts and then drops connections
// must not make this a busy loop.
func (s *Store) resubscribe(ctx context.Context, channel string) *pgx.Conn {
	bo := &backoff.ExponentialBackOff{InitialInterval: listenBackoffMin, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: listenBackoffMax}
	bo.Reset()
	for {
		t := time.NewTimer(min(max(bo.NextBackOff(), listenBackoffMin), listenBackoffMax))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if conn, err := s.subscribe(ctx, channel); err == nil {
			return conn
		}
	}
}

// receive passes notifications to fn until the connection fails or ctx is done.
func receive(ctx context.Context, conn *pgx.Conn, fn func(string)) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Idle: a timeout leaves the connection usable; check the server is still there.
			pctx, cancel := context.WithTimeout(ctx, listenIdle)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		default:
			return
		}
	}
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx)
}

// Notify sends payload to every session listening on channel, in every replica. The
// payload must be non-empty (see Listen) and under 8000 bytes.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if payload == "" {
		return errors.New("postgres: notify: empty payload")
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("postgres: notify %s: %w", channel, err)
	}
	return nil
}
