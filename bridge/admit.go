package bridge

import (
	"context"

	"github.com/taskbridge/taskbridge/bridge/internal/gate"
)

// The work gate (internal/gate) is shared by every route of a process: build one with
// NewGate and hand it to the engine's config (Config.Gate, ReverseConfig.Gate); replace its
// policy at runtime with Gate.SetPolicy.

// Gate is the one work gate: kill switch, sunset, drain, per-principal concurrency cap and
// upstream backpressure, with the same codes on every route.
type Gate = gate.Gate

// Policy is the gate's runtime policy (kill switch, sunset, limits), replaced as a whole by
// Gate.SetPolicy.
type Policy = gate.Policy

// GateConfig configures NewGate: the initial Policy, the drain state, the clock, metrics.
type GateConfig = gate.Config

// NewGate returns a work gate.
func NewGate(c GateConfig) *Gate { return gate.New(c) }

// SunsetReplacement names what legacy clients should move to, in the sunset error.
const SunsetReplacement = gate.SunsetReplacement

// startTask asks the gate whether a new legacy task of sess may start, before its intent
// record is written (so a refused call never reaches the upstream): kill switch, sunset,
// drain, the owner's unfinished tasks in the store, and an upstream slot for the create
// call. It runs after the idempotent replays in createTask and hostTask (a repeated request
// returns the task it made, even now). Existing tasks are never affected.
func (b *Bridge) startTask(ctx context.Context, own string) (release func(), err error) {
	return b.gate.StartTask(ctx, gate.Task{Era: gate.Legacy, Owner: own,
		Active: func(ctx context.Context) (int, error) { return b.st.CountActive(ctx, own) }})
}

// upstreamSlot takes an in-flight slot for a client's upstream call that starts no task
// (a plain tools/call, tools/list, a forwarded request).
func (b *Bridge) upstreamSlot() (release func(), err error) { return b.gate.Acquire() }
