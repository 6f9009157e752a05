package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartNodeServer runs an interop script with Node 22 in interop/ (e.g. "legacy-server.mjs",
// "--port", "0"), waits for the first stdout line naming an http:// URL, and returns the URL
// from there on. The process gets SIGINT, then SIGKILL after 5 s, when t ends; its stderr
// is logged if t failed.
func StartNodeServer(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(Node22(t), args...)
	cmd.Dir = InteropDir(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%v stderr:\n%s", args, stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "http://") {
				lines <- l
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case l := <-lines:
		return l[strings.Index(l, "http://"):]
	case <-time.After(30 * time.Second):
		t.Fatalf("%v printed no URL; stderr:\n%s", args, stderr.String())
	}
	return ""
}
