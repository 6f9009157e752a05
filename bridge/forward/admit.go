package forward

import (
	"context"

	"github.com/taskbridge/taskbridge/bridge/internal/gate"
)

// startTask asks the gate whether a new legacy task of sess may start, before its intent
// record is written (so a refused call never reaches the upstream): kill switch, sunset,
// drain, the owner's unfinished tasks in the store, and an upstream slot for the create
// call. It runs after the idempotent replays in createTask and hostTask (a repeated request
// returns the task it made, even now). Existing tasks are never affected.
func (b *Bridge) startTask(ctx context.Context, own string) (release func(), err error) {
	return b.gate.StartTask(ctx, gate.Task{Era: gate.Legacy, Owner: own,
		Active: func(ctx context.Context) (int, error) { return b.reg.countActive(ctx, own) }})
}

// upstreamSlot takes an in-flight slot for a client's upstream call that starts no task
// (a plain tools/call, tools/list, a forwarded request).
func (b *Bridge) upstreamSlot() (release func(), err error) { return b.gate.Acquire() }
