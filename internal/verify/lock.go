package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// LockVersion is the format version of a lock file (docs/verify.md#the-lock-file).
const LockVersion = 1

// Lock is the pinned manifest verify --lock writes: the facts a verdict holds for. serve
// --lock compares the live upstream with its Upstream and Tools (the drift); the other
// fields say what was verified, when, with what result.
type Lock struct {
	LockVersion int    `json:"lockVersion"`
	Date        string `json:"date"`    // RFC 3339, UTC
	Verdict     string `json:"verdict"` // pass | fail
	Bridge      string `json:"bridge"`  // the taskbridge version that verified
	// Configuration is the hash of the effective configuration (as in the report's facts).
	Configuration string `json:"configuration"`
	// ProtocolVersions are the revisions the bridge speaks on each face ("2025-11-25",
	// "2026-07-28") and the one spoken with the upstream ("upstream").
	ProtocolVersions map[string]string `json:"protocolVersions"`
	Upstream         LockUpstream      `json:"upstream"`
	// Tools by name.
	Tools map[string]LockTool `json:"tools"`
}

// LockUpstream is the upstream's identity as it announced it.
type LockUpstream struct {
	Name            string   `json:"name"`
	Version         string   `json:"version"`
	ProtocolVersion string   `json:"protocolVersion"`
	Extensions      []string `json:"extensions"` // sorted; empty for a 2025-11-25 upstream
}

// LockTool is one tool as the upstream declares it and as the bridge serves it.
type LockTool struct {
	// TaskSupport is the execution.taskSupport the upstream declares in tools/list, "unset"
	// when it declares none (the rule on the 2026-07-28 wire).
	TaskSupport string `json:"taskSupport"`
	// Advertised is the execution.taskSupport 2025-11-25 clients are told: the upstream's
	// own on a 2025-11-25 upstream (forbidden when unset), the bridge's fallback decision
	// (and tool_task_support) on a 2026-07-28 one.
	Advertised string `json:"advertised"`
	// Annotations is the SHA-256 of the tool's annotations object (keys sorted), or
	// "none" when it has none.
	Annotations string `json:"annotations"`
}

// HashAnnotations is LockTool.Annotations of one tool's raw annotations value. The value is
// decoded and re-encoded only to sort its keys: an upstream that reorders them has not
// changed them.
func HashAnnotations(raw []byte) string {
	if len(raw) == 0 {
		return "none"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid"
	}
	canon, _ := json.Marshal(v) // maps encode with sorted keys
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Drift is one pinned fact that differs between the lock and the live upstream.
type Drift struct {
	// What names the fact: "tool NAME taskSupport", "tool NAME advertised taskSupport",
	// "tool NAME annotations", "tool NAME"
	// (added or removed), "upstream version", "upstream extensions", …
	What   string `json:"what"`
	Locked string `json:"locked"` // "absent" for a tool that was not there
	Live   string `json:"live"`   // "absent" for a tool that is gone
}

func (d Drift) String() string { return fmt.Sprintf("%s: %s → %s", d.What, d.Locked, d.Live) }

// Compare returns the drift of live from locked, tools by name (sorted), then the
// upstream's identity. No drift: nil. Only the upstream side is compared: the date, the
// verdict and the bridge's own version and configuration say what was verified.
func Compare(locked, live Lock) []Drift {
	var out []Drift
	add := func(what, a, b string) {
		if a != b {
			out = append(out, Drift{What: what, Locked: a, Live: b})
		}
	}
	names := make([]string, 0, len(locked.Tools)+len(live.Tools))
	for n := range locked.Tools {
		names = append(names, n)
	}
	for n := range live.Tools {
		if _, ok := locked.Tools[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		a, inA := locked.Tools[n]
		b, inB := live.Tools[n]
		switch {
		case !inA:
			add("tool "+n, "absent", "taskSupport "+b.TaskSupport)
		case !inB:
			add("tool "+n, "taskSupport "+a.TaskSupport, "absent")
		default:
			add("tool "+n+" taskSupport", a.TaskSupport, b.TaskSupport)
			add("tool "+n+" advertised taskSupport", a.Advertised, b.Advertised)
			add("tool "+n+" annotations", shortHash(a.Annotations), shortHash(b.Annotations))
		}
	}
	add("upstream name", locked.Upstream.Name, live.Upstream.Name)
	add("upstream version", locked.Upstream.Version, live.Upstream.Version)
	add("upstream protocolVersion", locked.Upstream.ProtocolVersion, live.Upstream.ProtocolVersion)
	if !slices.Equal(locked.Upstream.Extensions, live.Upstream.Extensions) {
		add("upstream extensions", "["+strings.Join(locked.Upstream.Extensions, " ")+"]", "["+strings.Join(live.Upstream.Extensions, " ")+"]")
	}
	return out
}

// shortHash is a hash as drift shows it (its first 12 hex digits).
func shortHash(h string) string {
	if s, ok := strings.CutPrefix(h, "sha256:"); ok && len(s) > 12 {
		return "sha256:" + s[:12]
	}
	return h
}

// WriteLock writes l to path atomically (a temporary file renamed over it), so a reader
// never sees half a lock.
func WriteLock(path string, l Lock) error {
	l.LockVersion = LockVersion
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; removes it on failure
	if _, err = tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Close()
	} else {
		_ = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

// ReadLock reads a lock file: a clear error for a missing, malformed or unknown-version
// file.
func ReadLock(path string) (Lock, error) {
	var l Lock
	b, err := os.ReadFile(path)
	if err != nil {
		return l, fmt.Errorf("lock: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("lock %s: not a taskbridge lock file: %w", path, err)
	}
	switch {
	case l.LockVersion != LockVersion:
		return l, fmt.Errorf("lock %s: lockVersion %d, want %d (write it again with taskbridge verify --lock)", path, l.LockVersion, LockVersion)
	case l.Tools == nil:
		return l, errors.New("lock " + path + ": no tools (write it again with taskbridge verify --lock)")
	}
	return l, nil
}

// Stamp sets the lock's date and verdict from a report.
func (l *Lock) Stamp(rep *Report, now time.Time) {
	l.Date = now.UTC().Format(time.RFC3339)
	l.Verdict = "pass"
	if len(rep.Failed()) > 0 {
		l.Verdict = "fail"
	}
}
