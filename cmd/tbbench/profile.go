package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// profileBridge takes a CPU profile of the bridge process (its admin listener's
// /debug/pprof/profile) while 1 and then 32 clients call through it, writes each to
// <o.profile>-c<N>.pprof and prints its top entries (go tool pprof -top), so the profile
// of docs/benchmarks.md is one flag away: go run ./cmd/tbbench -phases passthrough -profile /tmp/tb.
func profileBridge(ctx context.Context, o options, br *bridgeProc, sids []string) error {
	if br.admin == "" {
		return fmt.Errorf("profile: the bridge announced no admin listener")
	}
	secs := max(1, int(2*o.duration/time.Second))
	for _, conc := range []int{1, 32} {
		client := newHTTPClient(conc)
		w := func(i int) (func() error, error) { return bridgePoster(client, br.url, sids[i], echoLegacy), nil }
		file := fmt.Sprintf("%s-c%d.pprof", o.profile, conc)
		done := make(chan error, 1)
		go func() { done <- fetchProfile(ctx, br.admin, secs, file) }()
		if _, err := load(ctx, conc, time.Duration(secs)*time.Second+500*time.Millisecond, w); err != nil {
			return err
		}
		if err := <-done; err != nil {
			return err
		}
		fmt.Printf("\n   CPU profile of the bridge at %d client(s), %d s: %s\n", conc, secs, file)
		for _, args := range [][]string{{"-top", "-nodecount=25"}, {"-top", "-cum", "-nodecount=40"}} {
			out, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof"}, args...), file)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("go tool pprof: %v: %s", err, out)
			}
			for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
				fmt.Println("   " + l)
			}
		}
	}
	return nil
}

// fetchProfile saves the admin listener's CPU profile of secs seconds to file.
func fetchProfile(ctx context.Context, admin string, secs int, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
