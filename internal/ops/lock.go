package ops

import "time"

// LockStatus is what /status shows of serve --lock: the last comparison of the live
// upstream with the verified lock file (docs/verify.md, "The lock file").
type LockStatus struct {
	File     string `json:"file"`
	Mode     string `json:"mode"`     // lock_drift: warn or refuse
	Verified string `json:"verified"` // the lock's date
	Verdict  string `json:"verdict"`  // the lock's verdict
	// Drift are the facts that differ ("tool NAME taskSupport: optional → required"); empty:
	// the upstream matches.
	Drift []string `json:"drift"`
	// Refusing: new task starts are refused because of the drift (lock_drift: refuse).
	Refusing  bool      `json:"refusing"`
	CheckedAt time.Time `json:"checkedAt"`
	// Error says why the last comparison could not be made (the previous drift stays).
	Error string `json:"error,omitempty"`
}
