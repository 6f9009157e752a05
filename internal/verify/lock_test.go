package verify

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLockCompare: a changed taskSupport, changed annotations, an added and a removed tool
// and a new upstream version are each one drift, named; reordered annotation keys are not.
func TestLockCompare(t *testing.T) {
	ann := HashAnnotations([]byte(`{"readOnlyHint":true,"idempotentHint":true}`))
	if HashAnnotations([]byte(`{"idempotentHint":true, "readOnlyHint":true}`)) != ann {
		t.Fatal("reordered annotation keys hash differently")
	}
	locked := Lock{Upstream: LockUpstream{Name: "fx", Version: "1.0", ProtocolVersion: "2026-07-28", Extensions: []string{"io.modelcontextprotocol/tasks"}},
		Tools: map[string]LockTool{"slow": {"unset", "optional", ann}, "greet": {"unset", "optional", ann}, "gone": {"unset", "forbidden", "none"}}}
	live := Lock{Upstream: LockUpstream{Name: "fx", Version: "1.1", ProtocolVersion: "2026-07-28", Extensions: []string{"io.modelcontextprotocol/tasks"}},
		Tools: map[string]LockTool{"slow": {"required", "optional", ann}, "greet": {"unset", "optional", HashAnnotations([]byte(`{"readOnlyHint":false}`))}, "new": {"unset", "optional", "none"}}}
	if d := Compare(locked, locked); d != nil {
		t.Fatalf("a lock drifts from itself: %v", d)
	}
	var got []string
	for _, d := range Compare(locked, live) {
		got = append(got, d.String())
	}
	want := []string{"tool gone: taskSupport unset → absent", "tool greet annotations: ",
		"tool new: absent → taskSupport unset", "tool slow taskSupport: unset → required", "upstream version: 1.0 → 1.1"}
	if len(got) != len(want) {
		t.Fatalf("drift %q, want %d entries", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("drift[%d] = %q, want %q…", i, got[i], want[i])
		}
	}
}

// TestLockFileRoundTrip: what WriteLock writes ReadLock reads back; a file that is not a
// lock, or of another version, is a clear error.
func TestLockFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tb.lock")
	l := Lock{Date: "2026-12-01T00:00:00Z", Verdict: "pass", Bridge: "dev", Configuration: "sha256:00",
		ProtocolVersions: map[string]string{"2025-11-25": "2025-11-25"}, Upstream: LockUpstream{Name: "fx", Extensions: []string{}},
		Tools: map[string]LockTool{"slow": {"unset", "optional", "none"}}}
	if err := WriteLock(path, l); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(path)
	l.LockVersion = LockVersion
	if err != nil || !reflect.DeepEqual(back, l) {
		t.Fatalf("read back %+v, %v; want %+v", back, err, l)
	}
	for name, content := range map[string]string{"junk": "tools: {}\n", "v9": `{"lockVersion":9,"tools":{}}`} {
		p := filepath.Join(dir, name)
		_ = os.WriteFile(p, []byte(content), 0o600)
		if _, err := ReadLock(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("the directory holds %d files, want 3 (no temporary file left)", len(entries))
	}
}
