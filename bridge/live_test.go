package bridge_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
)

// ping posts one JSON-RPC ping through the door with an optional bearer token and returns
// the HTTP status.
func ping(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDoorSetRate: a rate set at runtime (a reload) limits the next request, and lifting it
// lets requests through again.
func TestDoorSetRate(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		if code := ping(t, e.url, ""); code == http.StatusTooManyRequests {
			t.Fatal("rate-limited without a rate")
		}
	}
	e.door.SetRate(0.001, 1)
	if code := ping(t, e.url, ""); code == http.StatusTooManyRequests {
		t.Fatal("the first request after SetRate was refused (the bucket starts full)")
	}
	if code := ping(t, e.url, ""); code != http.StatusTooManyRequests {
		t.Fatalf("the second request at 0.001/s burst 1: %d, want 429", code)
	}
	e.door.SetRate(0, 0)
	if code := ping(t, e.url, ""); code == http.StatusTooManyRequests {
		t.Fatal("rate-limited after the rate was lifted")
	}
}

// TestDoorSetAuth: replacing the authenticator (new API keys in a reload) refuses the old
// key and admits the new one at once; it hands back the old one to close.
func TestDoorSetAuth(t *testing.T) {
	keys := func(k string) auth.Authenticator {
		a, err := auth.New(auth.Config{APIKeys: []auth.APIKey{{Key: k, Principal: "alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := keys("first-key-0123456789")
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.Auth = first })
	// Past the door a sessionless ping is the legacy face's 400: anything but 401 means the
	// key was admitted.
	if code := ping(t, e.url, "first-key-0123456789"); code == http.StatusUnauthorized {
		t.Fatalf("the configured key: %d", code)
	}
	if old := e.door.SetAuth(keys("second-key-0123456789")); old != first {
		t.Error("SetAuth did not return the authenticator it replaced")
	}
	if code := ping(t, e.url, "first-key-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("the removed key after SetAuth: %d, want 401", code)
	}
	if code := ping(t, e.url, "second-key-0123456789"); code == http.StatusUnauthorized {
		t.Errorf("the new key after SetAuth: %d, want it admitted", code)
	}
}
