//go:build linux

package main

import (
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// restartableUpstream is the fixture on a fixed loopback address that can die and come
// back on the same address.
type restartableUpstream struct {
	t    *testing.T
	fx   *fixture.Server
	addr string
	srv  *http.Server
}

func newRestartableUpstream(t *testing.T) *restartableUpstream {
	u := &restartableUpstream{t: t, fx: fixture.New(fixture.Options{Name: "readyz-upstream", Scale: 0.2})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.serve(ln)
	t.Cleanup(func() { u.stop(); u.fx.Close() })
	return u
}

func (u *restartableUpstream) serve(ln net.Listener) {
	u.srv = &http.Server{Handler: u.fx}
	go u.srv.Serve(ln)
}

func (u *restartableUpstream) stop() { _ = u.srv.Close() }

func (u *restartableUpstream) start() {
	u.t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatalf("listen again on %s: %v", u.addr, err)
	}
	u.serve(ln)
}

// setFileSizeLimit sets the soft RLIMIT_FSIZE of process pid (prlimit(2)). With 0 every
// write to a regular file fails with EFBIG, for root too: the kernel applies the limit to
// any process whatever its privileges (chmod does not stop root; a read-only bind mount
// needs privileges CI may not have). It returns the previous limit.
func setFileSizeLimit(t *testing.T, pid int, cur uint64) syscall.Rlimit {
	t.Helper()
	var old syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0,
		uintptr(unsafe.Pointer(&old)), 0, 0); e != 0 {
		t.Fatalf("prlimit get: %v", e)
	}
	lim := syscall.Rlimit{Cur: cur, Max: old.Max}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		t.Fatalf("prlimit set: %v", e)
	}
	return old
}

// waitReady polls /readyz every 100 ms until its status is want, and returns how long
// that took and the last body; it fails after limit.
func waitReady(t *testing.T, admin string, want int, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	for {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		var body [4096]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if resp.StatusCode == want {
			return time.Since(start), string(body[:n])
		}
		if time.Since(start) > limit {
			t.Fatalf("/readyz still %d after %v, want %d: %s", resp.StatusCode, limit, want, body[:n])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReadyzReflectsThePresent (acceptance 2): on a running serve, /readyz turns 503 within
// 5 s of the upstream dying, naming the upstream check, and 200 again once it is back; the
// same when the SQLite store can no longer be written (RLIMIT_FSIZE=0 on the serve
// process, see setFileSizeLimit), naming the store check, and after the limit is lifted.
func TestReadyzReflectsThePresent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	up := newRestartableUpstream(t)
	s := startServe(t, bin, "http://"+up.addr+"/mcp", filepath.Join(t.TempDir(), "tb.db"))
	waitReady(t, s.admin, 200, 10*time.Second)

	up.stop()
	took, body := waitReady(t, s.admin, 503, 5*time.Second)
	if gjson.Get(body, "failed").Raw != `["upstream"]` || gjson.Get(body, `checks.#(name=="upstream").detail`).Str == "" {
		t.Errorf("/readyz with the upstream dead: %s", body)
	}
	t.Logf("upstream died: /readyz unready after %v (%s)", took.Round(time.Millisecond), gjson.Get(body, `checks.#(name=="upstream").detail`).Str)
	up.start()
	took, _ = waitReady(t, s.admin, 200, 5*time.Second)
	t.Logf("upstream back: /readyz ready after %v", took.Round(time.Millisecond))

	old := setFileSizeLimit(t, s.cmd.Process.Pid, 0)
	took, body = waitReady(t, s.admin, 503, 5*time.Second)
	if gjson.Get(body, "failed").Raw != `["store"]` || gjson.Get(body, `checks.#(name=="store").detail`).Str == "" {
		t.Errorf("/readyz with the store unwritable: %s", body)
	}
	t.Logf("store unwritable: /readyz unready after %v (%s)", took.Round(time.Millisecond), gjson.Get(body, `checks.#(name=="store").detail`).Str)
	// The process is alive and its MCP listener answers meanwhile.
	if code, _ := get(t, s.admin+"/healthz"); code != 200 {
		t.Errorf("/healthz while the store is unwritable: %d", code)
	}
	setFileSizeLimit(t, s.cmd.Process.Pid, old.Cur)
	took, _ = waitReady(t, s.admin, 200, 5*time.Second)
	t.Logf("store writable again: /readyz ready after %v", took.Round(time.Millisecond))
	select {
	case err := <-s.exit:
		t.Fatalf("serve exited during the test: %v", err)
	default:
	}
}
