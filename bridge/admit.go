package bridge

import "github.com/taskbridge/taskbridge/bridge/internal/gate"

// The work gate (bridge/internal/gate) is shared by every route of a process: build one
// with NewGate and hand it to the routes' config (forward.Config.Gate, ReverseConfig.Gate);
// replace its policy at runtime with Gate.SetPolicy. These aliases are how code outside
// bridge/ names it.

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

// LockDriftError is the work gate's lock-drift refusal (Gate.SetDrift): changes name the
// facts that differ from the lock file lock.
var LockDriftError = gate.LockDriftError
