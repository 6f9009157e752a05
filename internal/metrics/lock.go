package metrics

// LockResults are the lock_checks_total results, created at zero.
var LockResults = []string{"match", "drift", "failed"}

// LockChecked records one comparison of the live upstream with the serve --lock file:
// result is one of LockResults, drifted the number of pinned facts that differ (the
// lock_drift gauge; unchanged on "failed", since nothing was compared).
func (m *Metrics) LockChecked(result string, drifted int) {
	if m == nil {
		return
	}
	m.lockChecks.WithLabelValues(result).Inc()
	if result != "failed" {
		m.lockDrift.Set(float64(drifted))
	}
}
