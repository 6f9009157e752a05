package config

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "taskbridge.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// load parses args as serve would and resolves the configuration.
func load(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return l.Load(envOf(env))
}

func TestExampleConfigLoads(t *testing.T) {
	path := filepath.Join("..", "..", "taskbridge.example.yaml")
	c, err := LoadFile(path, envOf(nil))
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	if err := c.Validate(true); err != nil {
		t.Fatalf("example config does not validate: %v", err)
	}
	if c.Upstream != "http://mcp-server:9000/mcp" || c.Admin != "127.0.0.1:8081" || c.SunsetWarn != 90*24*time.Hour {
		t.Errorf("unexpected values: upstream %q admin %q sunset_warn %s", c.Upstream, c.Admin, c.SunsetWarn)
	}
	if want := time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC); !c.Sunset.Equal(want) {
		t.Errorf("sunset = %v, want %v", c.Sunset, want)
	}
	if len(c.Auth.APIKeys) != 1 || c.Auth.APIKeys[0].Principal != "ci-runner" {
		t.Errorf("auth section not loaded: %+v", c.Auth)
	}
	// The example documents every key, so an operator sees all of them in one place.
	for _, k := range Keys() {
		if _, ok := c.Sources[k]; !ok {
			t.Errorf("taskbridge.example.yaml does not set key %q", k)
		}
	}
	if s := c.Sources["upstream"]; !strings.HasPrefix(s, path+":") {
		t.Errorf("source of upstream = %q, want %s:LINE", s, path)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "poll_floor_ms: 300\nheartbeat: 3s\nallowed_origins: [https://file.example]\nkill_switch: false\nsunset: 2030-01-01\n")
	type want struct {
		floor     int64
		heartbeat time.Duration
		origins   string
		kill      bool
		sunset    string
		src       string
	}
	env := map[string]string{
		"TASKBRIDGE_POLL_FLOOR_MS":   "400",
		"TASKBRIDGE_HEARTBEAT":       "4s",
		"TASKBRIDGE_ALLOWED_ORIGINS": "https://env.example, https://env2.example",
		"TASKBRIDGE_KILL_SWITCH":     "true",
		"TASKBRIDGE_SUNSET":          "2031-02-02",
	}
	flags := []string{"--poll-floor-ms", "500", "--heartbeat", "5s", "--allowed-origins", "https://flag.example",
		"--kill-switch=false", "--sunset", "off"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want want
	}{
		{"default", nil, nil, want{250, 10 * time.Second, "", false, "2027-07-28", "default"}},
		{"file", []string{"--config", file}, nil, want{300, 3 * time.Second, "https://file.example", false, "2030-01-01", file + ":1"}},
		{"file via env", nil, map[string]string{"TASKBRIDGE_CONFIG": file}, want{300, 3 * time.Second, "https://file.example", false, "2030-01-01", file + ":1"}},
		{"env over file", []string{"--config", file}, env, want{400, 4 * time.Second, "https://env.example,https://env2.example", true, "2031-02-02", "env TASKBRIDGE_POLL_FLOOR_MS"}},
		{"flag over env", append([]string{"--config", file}, flags...), env, want{500, 5 * time.Second, "https://flag.example", false, "off", "flag --poll-floor-ms"}},
		{"flag alone", flags, nil, want{500, 5 * time.Second, "https://flag.example", false, "off", "flag --poll-floor-ms"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			sunset := "off"
			if !c.Sunset.IsZero() {
				sunset = c.Sunset.Format(DateLayout)
			}
			got := want{c.PollFloorMs, c.Heartbeat, strings.Join(c.AllowedOrigins, ","), c.KillSwitch, sunset, c.source("poll_floor_ms")}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestFileErrorsHaveLineNumbers(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // substrings of the error, after the file name
	}{
		{"unknown key", "listen: 127.0.0.1:1\npoll_flor_ms: 5\n", []string{`:2: unknown key "poll_flor_ms" (did you mean "poll_floor_ms"?)`}},
		{"bad integer", "upstream: http://u/mcp\n\npoll_floor_ms: fast\n", []string{`:3: poll_floor_ms: want an integer, got "fast"`}},
		{"bad duration", "heartbeat: 10\n", []string{`:1: heartbeat: want a duration like 30s`}},
		{"bad date", "x: 1\nsunset: next year\n", []string{`:1: unknown key "x"`, `:2: sunset: want a date like 2027-07-28`}},
		{"bad bool", "kill_switch: maybe\n", []string{`:1: kill_switch: want true or false`}},
		{"list of maps", "allowed_origins:\n  - a: b\n", []string{`:2: allowed_origins: want a list of strings`}},
		{"mapping for scalar", "listen:\n  host: x\n", []string{`:1: listen: want a single value, got a mapping`}},
		{"duplicate", "listen: a:1\nlisten: b:2\n", []string{`:2: key "listen" given twice (first on line 1)`}},
		{"syntax", "listen: a:1\n  bad: [\n", []string{`line 2`}},
		{"auth unknown field", "listen: a:1\nauth:\n  api_keys:\n    - key: 0123456789abcdef0123\n      principle: x\n", []string{`auth: line 5: field principle not found`}},
		{"not a mapping", "- a\n- b\n", []string{`:1: the configuration must be a mapping`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			_, err := LoadFile(p, envOf(nil))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestBadFlagAndEnvValuesNameTheirSource(t *testing.T) {
	_, err := load(t, []string{"--poll-floor-ms", "x"}, map[string]string{"TASKBRIDGE_HEARTBEAT": "soon"})
	if err == nil || !strings.Contains(err.Error(), "flag --poll-floor-ms: poll_floor_ms: want an integer") ||
		!strings.Contains(err.Error(), "env TASKBRIDGE_HEARTBEAT: heartbeat: want a duration") {
		t.Fatalf("err = %v", err)
	}
	_, err = load(t, []string{"--auth", `{"api_keys":[{"kee":"x"}]}`}, nil)
	if err == nil || !strings.Contains(err.Error(), "flag --auth: auth:") || !strings.Contains(err.Error(), "kee") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateNamesSourceLine(t *testing.T) {
	p := writeFile(t, "upstream: ftp://x\npoll_floor_ms: 5000\npoll_ceil_ms: 1000\nlog_level: loud\notel_endpoint: collector:4318\n")
	c, err := LoadFile(p, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate(true)
	for _, w := range []string{
		p + `:1: upstream: want an http:// or https:// URL, got "ftp://x"`,
		p + `:2: poll_floor_ms: must not exceed poll_ceil_ms (1000), got 5000`,
		p + `:4: log_level: want debug, info, warn or error, got "loud"`,
		p + `:5: otel_endpoint: want an http:// or https:// URL without credentials`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate error %v\nlacks %q", err, w)
		}
	}
	c2, _ := load(t, nil, nil)
	if err := c2.Validate(true); err == nil || !strings.Contains(err.Error(), "default: upstream: required") {
		t.Errorf("missing upstream: err = %v", err)
	}
	if err := c2.Validate(false); err != nil {
		t.Errorf("without upstream requirement: %v", err)
	}
}

func TestPrintMasksSecretsAndRoundTrips(t *testing.T) {
	p := writeFile(t, `upstream: https://up.example/mcp
upstream_authorization: Bearer sup3r-s3cret-upstream
store: postgres://tb:pg-pass-123@db:5432/tb?sslmode=disable
allowed_origins: [https://a.example, https://b.example]
sunset: 2028-03-01
auth:
  api_keys:
    - key: api-key-0123456789abcdef
      principal: alice
`)
	c, err := LoadFile(p, envOf(map[string]string{"TASKBRIDGE_HEARTBEAT": "7s"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Print(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, secret := range []string{"sup3r-s3cret-upstream", "pg-pass-123", "api-key-0123456789abcdef"} {
		if strings.Contains(s, secret) {
			t.Errorf("printed config leaks %q:\n%s", secret, s)
		}
	}
	for _, w := range []string{
		"upstream_authorization: Bearer " + Mask,
		"store: postgres://tb:" + Mask + "@db:5432/tb?sslmode=disable",
		"heartbeat: 7s # env TASKBRIDGE_HEARTBEAT",
		"sunset: 2028-03-01 # " + p + ":5",
		"max_ttl: 24h # default",
		"allowed_origins: ['https://a.example', 'https://b.example'] # " + p + ":4",
		"principal: alice",
		"poll_floor_ms: 250 # default",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("printed config lacks %q:\n%s", w, s)
		}
	}
	// The printed form loads back to the same values (secrets aside).
	back, err := LoadFile(writeFile(t, s), envOf(nil))
	if err != nil {
		t.Fatalf("printed config does not load back: %v\n%s", err, s)
	}
	if back.Heartbeat != 7*time.Second || !back.Sunset.Equal(c.Sunset) || strings.Join(back.AllowedOrigins, ",") != "https://a.example,https://b.example" ||
		back.MaxTTL != c.MaxTTL || back.Auth.APIKeys[0].Principal != "alice" {
		t.Errorf("round trip changed values: %+v", back)
	}
}

func TestBoolFlagWithoutValue(t *testing.T) {
	c, err := load(t, []string{"--kill-switch", "--listen", "127.0.0.1:1"}, nil)
	if err != nil || !c.KillSwitch || c.Listen != "127.0.0.1:1" {
		t.Fatalf("--kill-switch alone: kill %v listen %q err %v", c.KillSwitch, c.Listen, err)
	}
}

func TestFlagsCoverEveryKey(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	Register(fs)
	for _, k := range Keys() {
		f := fs.Lookup(FlagName(k))
		if f == nil {
			t.Errorf("no flag for key %q", k)
			continue
		}
		if f.Usage == "" {
			t.Errorf("flag --%s has no help", f.Name)
		}
	}
}

// TestDocsListEveryKey keeps docs/configuration.md complete.
func TestDocsListEveryKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		row := "| `" + k + "` | `--" + FlagName(k) + "` | `" + EnvName(k) + "` |"
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/configuration.md lacks the row for %q", k)
		}
	}
}
