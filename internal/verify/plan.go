package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Plan says which upstream tools verify may call and how. verify calls no tool the plan
// does not name, except tools annotated readOnlyHint (called with no arguments).
type Plan struct {
	Tools struct {
		// Slow is a tool that runs as a task for a while (at least a second or two), so
		// that cancels and restarts happen while it works.
		Slow *Tool `yaml:"slow"`
		// Quick is a tool that answers at once (the sync path).
		Quick *Tool `yaml:"quick"`
		// Input is a tool whose task asks the client for input (input_required, an
		// elicitation): the recovery gate cuts and restarts while it waits. verify
		// declines every elicitation, so it never confirms what the tool asks; the
		// security gate puts a canary in the declining answers' _meta.
		Input *Tool `yaml:"input"`
	} `yaml:"tools"`
	// AcceptSessionScopedListing accepts a configuration without authentication: tasks
	// (and tasks/list) are then scoped to each 2025-11-25 session, not to a principal.
	AcceptSessionScopedListing bool `yaml:"accept_session_scoped_listing"`
	// Principals are two credentials as "Header: value" lines (needed with auth.jwt; with
	// api_keys or trusted_header verify makes its own synthetic principals).
	Principals []string `yaml:"principals"`
	Load       struct {
		Concurrent int `yaml:"concurrent"` // tasks started at once (default 8, within max_concurrent_tasks)
		Pollers    int `yaml:"pollers"`    // clients polling one task (default 4)
	} `yaml:"load"`
	// StepTimeout bounds each step (default 60s).
	StepTimeout time.Duration `yaml:"step_timeout"`

	hash string
}

// CanaryPlaceholder in a plan argument's string value is replaced by a random secret of
// the run before the tool is called; the security gate then looks for that secret in the
// bridge's log ("arguments never logged").
const CanaryPlaceholder = "${canary}"

// withCanary returns a copy of p whose tool arguments have every CanaryPlaceholder
// replaced by secret, and how many string values carried one.
func (p *Plan) withCanary(secret string) (*Plan, int) {
	q := *p
	n := 0
	for _, t := range []**Tool{&q.Tools.Slow, &q.Tools.Quick, &q.Tools.Input} {
		if *t == nil {
			continue
		}
		c := **t
		if a, ok := plantCanary(c.Arguments, secret, &n).(map[string]any); ok {
			c.Arguments = a
		}
		*t = &c
	}
	return &q, n
}

// plantCanary copies v (a decoded YAML value) with the placeholder replaced in its strings.
func plantCanary(v any, secret string, n *int) any {
	switch v := v.(type) {
	case string:
		if strings.Contains(v, CanaryPlaceholder) {
			*n++
			return strings.ReplaceAll(v, CanaryPlaceholder, secret)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = plantCanary(e, secret, n)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plantCanary(e, secret, n)
		}
		return out
	}
	return v
}

// Tool is one tool the plan names, with its arguments.
type Tool struct {
	Name      string         `yaml:"name"`
	Arguments map[string]any `yaml:"arguments"`
}

func (t Tool) args() map[string]any {
	if t.Arguments == nil {
		return map[string]any{}
	}
	return t.Arguments
}

// LoadPlan reads a plan file; unknown keys are an error.
func LoadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	var p Plan
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	for _, t := range []*Tool{p.Tools.Slow, p.Tools.Quick, p.Tools.Input} {
		if t != nil && t.Name == "" {
			return nil, fmt.Errorf("plan %s: a tool without a name", path)
		}
	}
	if p.Load.Concurrent < 0 || p.Load.Pollers < 0 || p.StepTimeout < 0 {
		return nil, fmt.Errorf("plan %s: load and step_timeout must not be negative", path)
	}
	if n := len(p.Principals); n != 0 && n != 2 {
		return nil, fmt.Errorf("plan %s: principals: want exactly two credentials, got %d", path, n)
	}
	sum := sha256.Sum256(b)
	p.hash = hex.EncodeToString(sum[:8])
	return &p, nil
}

func (p *Plan) withDefaults() *Plan {
	q := *p
	if q.Load.Concurrent == 0 {
		q.Load.Concurrent = 8
	}
	if q.Load.Pollers == 0 {
		q.Load.Pollers = 4
	}
	if q.StepTimeout == 0 {
		q.StepTimeout = 60 * time.Second
	}
	return &q
}
