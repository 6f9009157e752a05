// Acceptance for shipping taskbridge (issue 18, install): scripts/release.sh builds a
// static, stamped binary with a checksum file; "taskbridge version" prints what the build
// recorded; deploy/taskbridge.service passes systemd-analyze verify and is hardened;
// deploy/Containerfile builds a static binary onto a non-root distroless image with a volume
// for the store (docker cannot run on the test machines, so its content is checked); the
// module is installable with go install (no replace directives, no cgo).
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// modulePath is the module path of go.mod, which the README's go install line names.
const modulePath = "github.com/taskbridge/taskbridge"

func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Missing(t, "go not on PATH: %v", err)
	}
	root := testenv.RepoRoot(t)
	dist := t.TempDir()
	const ver = "v1.2.3-test.1"
	const epoch = 1767225600 // 2026-01-01T00:00:00Z
	out, err := runScript(t, root, []string{"TARGETS=linux/amd64", "DIST=" + dist, "SOURCE_DATE_EPOCH=" + strconv.Itoa(epoch)},
		"scripts/release.sh", ver)
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	name := "taskbridge_" + ver + "_linux_amd64"
	bin := filepath.Join(dist, name)

	t.Run("version output", func(t *testing.T) {
		got := runCmd(t, bin, "version")
		for _, want := range []string{"taskbridge " + ver + "\n", "module:      " + modulePath + " ",
			"build date:  2026-01-01T00:00:00Z\n", "go:          go1.", " linux/amd64\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("version output lacks %q:\n%s", want, got)
			}
		}
		if head := gitHead(t, root); head != "" && !strings.Contains(got, "revision:    "+head) {
			t.Errorf("version output does not name the revision %s:\n%s", head, got)
		}
		if flag := runCmd(t, bin, "--version"); flag != got {
			t.Errorf("--version printed\n%s\nversion printed\n%s", flag, got)
		}
	})

	t.Run("static and trimmed", func(t *testing.T) {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Section(".interp") != nil {
			t.Errorf("%s has an ELF interpreter: not a static binary", name)
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s links shared libraries %v", name, libs)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(root+"/")) {
			t.Errorf("%s contains the build directory %s: built without -trimpath", name, root)
		}
	})

	t.Run("checksum file", func(t *testing.T) {
		sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
		for _, f := range []string{name, name + ".tar.gz"} {
			want, ok := sums[f]
			if !ok {
				t.Errorf("SHA256SUMS has no line for %s: %v", f, sums)
				continue
			}
			b, err := os.ReadFile(filepath.Join(dist, f))
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
				t.Errorf("SHA256SUMS says %s for %s, the file hashes to %x", want, f, got)
			}
		}
		if len(sums) != 2 {
			t.Errorf("SHA256SUMS lists %d files, want 2 (one target): %v", len(sums), sums)
		}
	})

	t.Run("archive", func(t *testing.T) {
		files := tarFiles(t, filepath.Join(dist, name+".tar.gz"))
		for _, f := range []string{"taskbridge", "README.md", "taskbridge.example.yaml", "deploy/taskbridge.service", "deploy/Containerfile"} {
			if _, ok := files[name+"/"+f]; !ok {
				t.Errorf("archive lacks %s/%s; it has %v", name, f, files)
			}
		}
		raw, _ := os.ReadFile(bin)
		if !bytes.Equal(files[name+"/taskbridge"], raw) {
			t.Errorf("the archive's binary differs from %s", name)
		}
	})

	t.Run("bad version refused", func(t *testing.T) {
		out, err := runScript(t, root, []string{"TARGETS=linux/amd64", "DIST=" + t.TempDir()}, "scripts/release.sh", "1.2")
		if err == nil || !strings.Contains(out, "not a semantic version") {
			t.Errorf("release.sh 1.2: err %v, output:\n%s", err, out)
		}
	})
}

// runScript runs a repository script with extra environment and returns its combined output.
func runScript(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitHead is HEAD of the repository, or "" without git.
func gitHead(t *testing.T, dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("no git revision to compare: %v", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// readSums parses a sha256sum file: "HEX  NAME" per line.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^([0-9a-f]{64}) [ *](\S+)$`)
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: malformed line %q", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums
}

// tarFiles reads a .tar.gz into name → content (regular files only).
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// A test binary is built from the checkout: version dev, the module path from the build info.
	for _, want := range []string{"taskbridge dev\n", "module:      " + modulePath + " ", "revision:    ", "build date:  ", "go:          go1."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--version lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSystemdUnit(t *testing.T) {
	analyze := "/usr/bin/systemd-analyze"
	if _, err := os.Stat(analyze); err != nil {
		testenv.Missing(t, "%s (Debian package systemd; scripts/test.sh installs it under CI=true)", analyze)
	}
	root := testenv.RepoRoot(t)
	unit, err := os.ReadFile(filepath.Join(root, "deploy", "taskbridge.service"))
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's binary exists: a copy of the unit points at an
	// executable that does (this test binary); everything else is the unit as shipped.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const execStart = "ExecStart=/usr/local/bin/taskbridge serve"
	if !bytes.Contains(unit, []byte(execStart)) {
		t.Fatalf("deploy/taskbridge.service has no line %q", execStart)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "taskbridge.service")
	if err := os.WriteFile(copyPath, bytes.Replace(unit, []byte(execStart), []byte("ExecStart="+self+" serve"), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("verify", func(t *testing.T) {
		var stderr bytes.Buffer
		cmd := exec.Command(analyze, "verify", copyPath)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		// verify exits 0 on an unknown or misspelt key and only warns: any output fails.
		if err != nil || stderr.Len() > 0 || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s%s", err, out, stderr.String())
		}
	})

	t.Run("exposure", func(t *testing.T) {
		out, err := exec.Command(analyze, "security", "--offline=yes", copyPath).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze security: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`Overall exposure level for taskbridge\.service: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no exposure level in:\n%s", out)
		}
		level, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("systemd-analyze security exposure: %.1f (0 = fully locked down, 10 = unprotected)", level)
		if level > 2.0 {
			t.Errorf("exposure %.1f, want at most 2.0 (the hardened unit scores 1.1):\n%s", level, out)
		}
	})

	t.Run("directives", func(t *testing.T) {
		d := unitDirectives(unit)
		for key, want := range map[string]string{
			"User": "taskbridge", "Group": "taskbridge", "StateDirectory": "taskbridge",
			"ProtectSystem": "strict", "NoNewPrivileges": "yes", "Restart": "on-failure",
			"KillSignal": "SIGTERM", "ExecReload": "/bin/kill -HUP $MAINPID",
			"Environment": "TASKBRIDGE_STORE=sqlite:/var/lib/taskbridge/taskbridge.db",
		} {
			if !containsValue(d[key], want) {
				t.Errorf("%s=%q, want %q among them", key, d[key], want)
			}
		}
		// SIGKILL must not cut a drain short: TimeoutStopSec covers drain_timeout's default
		// and the shutdown after it, without being far longer.
		stop, err := parseSystemdSpan(last(d["TimeoutStopSec"]))
		if err != nil {
			t.Fatalf("TimeoutStopSec: %v", err)
		}
		drain := config.Default().DrainTimeout
		if stop <= drain+20*time.Second || stop > drain+time.Minute {
			t.Errorf("TimeoutStopSec %s, want drain_timeout's default %s plus the shutdown (20s–1m more)", stop, drain)
		}
	})
}

// unitDirectives reads KEY=VALUE lines of a unit file (every value of repeated keys).
func unitDirectives(unit []byte) map[string][]string {
	d := map[string][]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			d[k] = append(d[k], v)
		}
	}
	return d
}

func containsValue(vs []string, want string) bool {
	for _, v := range vs {
		if v == want {
			return true
		}
	}
	return false
}

func last(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseSystemdSpan reads a systemd time span made of "10min", "30s", "1h" words.
func parseSystemdSpan(s string) (time.Duration, error) {
	var total time.Duration
	units := map[string]time.Duration{"h": time.Hour, "min": time.Minute, "s": time.Second, "ms": time.Millisecond}
	re := regexp.MustCompile(`^(\d+)(h|min|s|ms)$`)
	for _, w := range strings.Fields(s) {
		m := re.FindStringSubmatch(w)
		if m == nil {
			return 0, errors.New("cannot read time span " + strconv.Quote(s))
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * units[m[2]]
	}
	if total == 0 {
		return 0, errors.New("empty time span")
	}
	return total, nil
}

// TestContainerfile checks the container recipe's content: docker builds need an engine,
// and none runs on the test machines.
func TestContainerfile(t *testing.T) {
	root := testenv.RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms, users, volumes, envs []string
	var build string
	for _, line := range joinContinuations(string(b)) {
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "VOLUME":
			volumes = append(volumes, rest)
		case "ENV":
			envs = append(envs, rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				build = rest
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("want a build stage and a runtime stage, got FROM %v", froms)
	}
	final := froms[len(froms)-1]
	if !strings.HasPrefix(final, "scratch") && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("runtime base %q: want scratch or gcr.io/distroless/static (no libc, no shell)", final)
	}
	if !strings.Contains(froms[0], ":") || strings.HasSuffix(froms[0], ":latest AS build") {
		t.Errorf("build base %q is not pinned to a version", froms[0])
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/taskbridge"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build step lacks %s: %q", want, build)
		}
	}
	if len(users) == 0 {
		t.Errorf("no USER: the container would run as root")
	} else if u := users[len(users)-1]; u == "0" || strings.HasPrefix(u, "root") || strings.HasPrefix(u, "0:") {
		t.Errorf("USER %s is root", u)
	}
	if !slicesContainsSub(volumes, "/var/lib/taskbridge") {
		t.Errorf("VOLUME %v does not hold /var/lib/taskbridge", volumes)
	}
	if !slicesContainsSub(envs, "TASKBRIDGE_STORE=sqlite:/var/lib/taskbridge/") {
		t.Errorf("ENV %v does not put the SQLite store in the volume", envs)
	}
	if !strings.Contains(string(b), "STOPSIGNAL SIGTERM") {
		t.Errorf("no STOPSIGNAL SIGTERM (the drain signal)")
	}
}

// joinContinuations returns the instructions of a Containerfile, backslash-continued lines
// joined, comments dropped.
func joinContinuations(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cur.WriteString(t)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

func slicesContainsSub(vs []string, sub string) bool {
	for _, v := range vs {
		if strings.Contains(v, sub) {
			return true
		}
	}
	return false
}

// TestGoInstallable: what "go install github.com/taskbridge/taskbridge/cmd/taskbridge@VERSION"
// needs from the module: go.mod names the path the README installs, has no replace
// directive (go install pkg@version refuses them), and the command builds without cgo
// (TestReleaseScript builds it with CGO_ENABLED=0).
func TestGoInstallable(t *testing.T) {
	root := testenv.RepoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(mod, []byte("module "+modulePath+"\n")) {
		t.Errorf("go.mod does not start with module %s", modulePath)
	}
	if regexp.MustCompile(`(?m)^\s*replace\b|^\s*replace\s*\(`).Match(mod) {
		t.Errorf("go.mod has a replace directive: go install %s/cmd/taskbridge@VERSION would refuse it", modulePath)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	install := "go install " + modulePath + "/cmd/taskbridge@"
	i := bytes.Index(readme, []byte(install))
	if i < 0 {
		t.Fatalf("README.md has no %q line", install)
	}
	if j := bytes.Index(readme, []byte("```sh")); j < 0 || j > i || bytes.Contains(readme[j:i], []byte("\n```\n")) {
		t.Errorf("the go install line is not in the README's first code block")
	}
}
