// Package defaults holds taskbridge's one set of default settings. internal/config starts
// the effective configuration from it (so docs/configuration.md, taskbridge.example.yaml
// and "taskbridge config" show these values), and every route, the front door and the
// faces fill a zero setting from it, so a bridge built in a test or by another program
// behaves as the binary does. A default is written here and nowhere else.
package defaults

import "time"

// Values are the defaults of the settings more than one part reads.
type Values struct {
	// Poll intervals told to clients and used upstream, ms.
	PollFloorMs, PollCeilMs int64
	// MaxTTL caps the ttl told to 2025-11-25 clients.
	MaxTTL time.Duration
	// Heartbeat is the keep-alive interval on long requests.
	Heartbeat time.Duration
	// Upstream call timeouts: a tools/call that may create a task, a tasks/get, a
	// tasks/cancel or tasks/update, a plain forwarded request.
	CreateTimeout, StatusTimeout, CancelTimeout, CallTimeout time.Duration
	// InputTimeout bounds the wait for the answer to a relayed input request.
	InputTimeout time.Duration
	// PollFaultBudget is how many invalid tasks/get replies in a row end a task.
	PollFaultBudget int
	// ListPageSize is the tasks/list page size.
	ListPageSize int
	// MaxResultBytes caps a stored result or error.
	MaxResultBytes int64
	// AuditRetention, SessionRetention: how long audit parts and idle sessions are kept;
	// PurgeInterval: how often the purge runs.
	AuditRetention, SessionRetention, PurgeInterval time.Duration
	// HostWorkers is the size of the bridge-hosted task pool.
	HostWorkers int
	// InfoTTL is how long the reverse route trusts a legacy upstream's initialize and tools.
	InfoTTL time.Duration
	// Front door and face bounds: a request body (and a stdio line), the time to read it,
	// the SSE events kept for resumption, the clientInfo and capabilities kept per session.
	MaxBodyBytes        int64
	BodyReadTimeout     time.Duration
	MaxReplayBytes      int64
	MaxSessionInfoBytes int
}

// Defaults is the one set of defaults. Read it; never assign to it.
var Defaults = Values{
	PollFloorMs:         250,
	PollCeilMs:          30000,
	MaxTTL:              24 * time.Hour,
	Heartbeat:           10 * time.Second,
	CreateTimeout:       60 * time.Second,
	StatusTimeout:       10 * time.Second,
	CancelTimeout:       10 * time.Second,
	CallTimeout:         10 * time.Minute,
	InputTimeout:        5 * time.Minute,
	PollFaultBudget:     5,
	ListPageSize:        50,
	MaxResultBytes:      8 << 20,
	AuditRetention:      30 * 24 * time.Hour,
	SessionRetention:    30 * 24 * time.Hour,
	PurgeInterval:       time.Minute,
	HostWorkers:         8,
	InfoTTL:             60 * time.Second,
	MaxBodyBytes:        4 << 20,
	BodyReadTimeout:     60 * time.Second, // as nginx's client_body_timeout
	MaxReplayBytes:      64 << 20,
	MaxSessionInfoBytes: 8 << 10,
}

// Fill sets *v to d when it is zero or negative (unset).
func Fill[T ~int | ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
