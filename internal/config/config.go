// Package config is taskbridge's configuration: one flat YAML file, every key of which can
// also be set by a command-line flag and by a TASKBRIDGE_* environment variable.
//
// Precedence, highest first: flag > environment > file > default. The file is named by
// --config or TASKBRIDGE_CONFIG. A key "poll_floor_ms" is the flag --poll-floor-ms and the
// variable TASKBRIDGE_POLL_FLOOR_MS. Lists take a YAML sequence in the file and a
// comma-separated string in flags and variables; sections (auth) take a YAML mapping in the
// file and a YAML or JSON document in flags and variables.
//
// Errors name where the bad value came from: "taskbridge.yaml:12: poll_floor_ms: …",
// "env TASKBRIDGE_SUNSET: …", "flag --heartbeat: …". Unknown keys in a file are errors (a
// typo must not silently fall back to a default).
//
// The table of keys is the Config struct itself: each field's `key` tag names it, `help`
// describes it (flags and docs/configuration.md use the same words), and `secret` masks it
// when the configuration is printed.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/redact"
)

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "TASKBRIDGE_"

// DateLayout is the layout of date keys (sunset).
const DateLayout = "2006-01-02"

// Config is the effective configuration. See taskbridge.example.yaml and
// docs/configuration.md for every key.
type Config struct {
	Listen                string        `key:"listen" help:"address of the MCP listener; the endpoint is http://ADDR/mcp"`
	Admin                 string        `key:"admin" help:"address of the admin listener (/metrics, /healthz, /readyz, /status, POST /admin/drain|undrain|reload); empty or \"off\": none, and only /healthz and /readyz are served, on the MCP listener"`
	PublicMetrics         bool          `key:"public_metrics" help:"without an admin listener, serve /metrics on the MCP listener too (its labels name clients; off by default)"`
	Upstream              string        `key:"upstream" secret:"url" help:"URL of the SEP-2663 (2026-07-28) upstream MCP endpoint (required by serve)"`
	UpstreamCmd           string        `key:"upstream_cmd" help:"run the upstream as a child process over stdio instead: \"CMD ARGS\" (quotes group words; not a shell)"`
	UpstreamCloseWait     time.Duration `key:"upstream_close_wait" help:"on shutdown, how long to wait for the upstream child to exit after closing its stdin"`
	UpstreamTermWait      time.Duration `key:"upstream_term_wait" help:"then how long to wait after SIGTERM before SIGKILL"`
	UpstreamAuthorization string        `key:"upstream_authorization" secret:"true" help:"value of the Authorization header sent upstream (the bridge's own credential, never the client's)"`
	Store                 string        `key:"store" secret:"dsn" help:"task store: sqlite:PATH or postgres://USER:PASSWORD@HOST/DB"`
	LogLevel              string        `key:"log_level" help:"log level: debug, info, warn, error"`
	LogFormat             string        `key:"log_format" help:"log format: auto (console on a terminal, else JSON), json, console"`
	AccessLog             bool          `key:"access_log" help:"one info line per MCP request (method, route, task, duration_ms, outcome); changeable by reload"`
	MaxBody               int64         `key:"max_body" help:"largest accepted request body, bytes"`
	PollFloorMs           int64         `key:"poll_floor_ms" help:"lowest poll interval told to clients and used upstream, ms"`
	PollCeilMs            int64         `key:"poll_ceil_ms" help:"highest poll interval told to legacy clients, ms"`
	MaxTTL                time.Duration `key:"max_ttl" help:"cap on the task ttl told to legacy clients"`
	Heartbeat             time.Duration `key:"heartbeat" help:"keep-alive interval on long requests (sync-collapsed calls, blocking tasks/result; SSE replies of the modern pass-through)"`
	CreateTimeout         time.Duration `key:"create_timeout" help:"timeout of an upstream tools/call that may create a task"`
	StatusTimeout         time.Duration `key:"status_timeout" help:"timeout of an upstream tasks/get"`
	CancelTimeout         time.Duration `key:"cancel_timeout" help:"timeout of an upstream tasks/cancel or tasks/update"`
	InputTimeout          time.Duration `key:"input_timeout" help:"how long a stream waits for the answer to a relayed input request"`
	PollFaultBudget       int           `key:"poll_fault_budget" help:"upstream tasks/get replies in a row that break the protocol (or are about another task) before the task ends failed with an unknown outcome"`
	ListPageSize          int           `key:"list_page_size" help:"tasks/list page size"`
	AllowedOrigins        []string      `key:"allowed_origins" help:"browser origins allowed besides loopback ones"`
	KillSwitch            bool          `key:"kill_switch" help:"refuse all new task creation at once; existing tasks are still served"`
	Sunset                time.Time     `key:"sunset" help:"date (YYYY-MM-DD, UTC) from which new legacy task creation is refused; \"off\" disables"`
	SunsetWarn            time.Duration `key:"sunset_warn" help:"how long before the sunset the bridge starts warning in its log"`
	Lock                  string        `key:"lock" help:"the pinned manifest (docs/verify.md): verify --lock writes it; serve --lock compares the live upstream with it at start and on reload"`
	LockDrift             string        `key:"lock_drift" help:"what serve does when the upstream differs from the lock: warn (log, count, show on /status) or refuse (also refuse new task starts)"`
	DrainTimeout          time.Duration `key:"drain_timeout" help:"longest a drain waits for in-flight calls and tracked tasks before the process exits"`
	DrainQuiet            time.Duration `key:"drain_quiet" help:"how long a draining replica must be idle before it exits"`
	ReportWindow          time.Duration `key:"report_window" help:"how far back the migration report and /status look for legacy clients"`
	Auth                  auth.Config   `key:"auth" help:"client authentication section (api_keys, jwt, trusted_header); see docs/security.md"`
	MaxConcurrentTasks    int           `key:"max_concurrent_tasks" help:"unfinished tasks allowed per principal (per session without auth); 0: no cap"`
	RequestRate           float64       `key:"request_rate" help:"JSON-RPC requests per second allowed per principal on each replica; 0: no cap"`
	RequestBurst          int           `key:"request_burst" help:"burst above request_rate (0: twice the rate)"`
	BodyReadTimeout       time.Duration `key:"body_read_timeout" help:"longest the reading of one request body may take; a slower (trickled) body is cut off with 408"`
	MaxUpstreamInflight   int           `key:"max_upstream_inflight" help:"upstream calls in flight at once on behalf of clients; beyond it a request is refused at once with \"overloaded, retry after\" (0: no cap)"`
	StdioPrincipal        string        `key:"stdio_principal" help:"principal of the taskbridge stdio session (its tasks belong to it as to an API key of that principal); empty: single-user, tasks bound to the session"`
	MaxResultBytes        int64         `key:"max_result_bytes" help:"largest task result or error kept; a larger one fails the task"`
	AuditRetention        time.Duration `key:"audit_retention" help:"how long the audit part of a task record outlives its ttl"`
	PurgeInterval         time.Duration `key:"purge_interval" help:"how often expired task payloads are purged"`
	HostAllow             []string      `key:"host_allow" help:"tools that may run as bridge-hosted tasks whatever their annotations (docs/fallback.md)"`
	HostDeny              []string      `key:"host_deny" help:"tools never run as bridge-hosted tasks (wins over host_allow)"`
	NoHosting             bool          `key:"no_hosting" help:"refuse every bridge-hosted task"`
	HostWorkers           int           `key:"host_workers" help:"upstream calls of bridge-hosted tasks run at once (x16 may be queued)"`
	ToolTaskSupport       []string      `key:"tool_task_support" help:"taskSupport advertised to 2025-11-25 clients per tool: name=forbidden|optional|required"`

	// TLS and OAuth protected-resource metadata (docs/security.md).
	TLSCert                   string   `key:"tls_cert" help:"PEM certificate (chain) of the MCP and admin listeners: with tls_key they serve HTTPS; re-read on SIGHUP"`
	TLSKey                    string   `key:"tls_key" help:"PEM private key of tls_cert"`
	TLSClientCA               string   `key:"tls_client_ca" help:"PEM CA bundle: the MCP listener requires client certificates issued by it (mTLS); re-read on SIGHUP"`
	AdminTLSClientCA          string   `key:"admin_tls_client_ca" help:"PEM CA bundle: the admin listener requires client certificates issued by it (mTLS); re-read on SIGHUP"`
	UpstreamCA                string   `key:"upstream_ca" help:"PEM CA bundle that verifies an https:// upstream instead of the system roots"`
	UpstreamCert              string   `key:"upstream_cert" help:"PEM client certificate for an https:// upstream that asks for one (with upstream_key); re-read on SIGHUP"`
	UpstreamKey               string   `key:"upstream_key" help:"PEM private key of upstream_cert"`
	OAuthResource             string   `key:"oauth_resource" help:"with auth.jwt: this endpoint's public URL as clients use it (e.g. https://mcp.example.com/mcp), the resource of the OAuth protected-resource metadata; empty: from each request's Host"`
	OAuthAuthorizationServers []string `key:"oauth_authorization_servers" help:"with auth.jwt: issuer URLs of the authorization servers named in the protected-resource metadata (default: auth.jwt.issuer)"`
	OAuthScopes               []string `key:"oauth_scopes" help:"with auth.jwt: scopes listed in the protected-resource metadata and in the 401 challenge"`

	// Traces (docs/operations.md): off unless set or OTEL_EXPORTER_OTLP_ENDPOINT is.
	OTelEndpoint string `key:"otel_endpoint" help:"OTLP/HTTP collector base URL for OpenTelemetry traces (spans go to it + /v1/traces), e.g. http://127.0.0.1:4318; empty: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set"`

	// Memory and connection bounds (docs/security.md).
	ReadHeaderTimeout   time.Duration `key:"read_header_timeout" help:"longest a client may take to send a request's headers (both listeners)"`
	IdleTimeout         time.Duration `key:"idle_timeout" help:"keep-alive connections idle this long are closed (both listeners)"`
	MaxHeaderBytes      int           `key:"max_header_bytes" help:"largest request header block accepted, bytes; a larger one gets HTTP 431"`
	MaxReplayBytes      int64         `key:"max_replay_bytes" help:"total bytes of SSE events kept for resumption in this process; beyond it the oldest resumable streams are dropped"`
	MaxSessionInfoBytes int           `key:"max_session_info_bytes" help:"largest clientInfo or capabilities stored per session, bytes: a larger clientInfo is kept as name, version and title; larger capabilities refuse initialize"`

	// Sources maps each key to where its value came from: "default", "FILE:LINE",
	// "env NAME" or "flag --NAME".
	Sources map[string]string `key:"-"`
}

// Default returns the configuration with every default set: internal/defaults, and the
// settings only the binary reads.
func Default() *Config {
	d := defaults.Defaults
	return &Config{
		Listen:            "127.0.0.1:8080",
		Store:             "sqlite:taskbridge.db",
		UpstreamCloseWait: 5 * time.Second,
		UpstreamTermWait:  5 * time.Second,
		LogLevel:          "info",
		LogFormat:         "auto",
		AccessLog:         true,
		MaxBody:           d.MaxBodyBytes,
		PollFloorMs:       d.PollFloorMs,
		PollCeilMs:        d.PollCeilMs,
		MaxTTL:            d.MaxTTL,
		Heartbeat:         d.Heartbeat,
		CreateTimeout:     d.CreateTimeout,
		StatusTimeout:     d.StatusTimeout,
		CancelTimeout:     d.CancelTimeout,
		InputTimeout:      d.InputTimeout,
		PollFaultBudget:   d.PollFaultBudget,
		ListPageSize:      d.ListPageSize,
		Sunset:            time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC),
		SunsetWarn:        90 * 24 * time.Hour,
		LockDrift:         "warn",
		DrainTimeout:      10 * time.Minute,
		DrainQuiet:        5 * time.Second,
		ReportWindow:      d.SessionRetention,
		MaxResultBytes:    d.MaxResultBytes,
		AuditRetention:    d.AuditRetention,
		PurgeInterval:     d.PurgeInterval,
		HostWorkers:       d.HostWorkers,
		Sources:           map[string]string{},

		// Memory and connection bounds.
		ReadHeaderTimeout:   10 * time.Second,
		IdleTimeout:         60 * time.Second,
		MaxHeaderBytes:      64 << 10,
		MaxReplayBytes:      d.MaxReplayBytes,
		MaxSessionInfoBytes: d.MaxSessionInfoBytes,

		// The front door and the work gate.
		BodyReadTimeout:     d.BodyReadTimeout,
		MaxUpstreamInflight: 256,
	}
}

// AdminEnabled reports whether the admin listener runs.
func (c *Config) AdminEnabled() bool { return c.Admin != "" && c.Admin != "off" }

// field is one key of the table.
type field struct {
	key, help, secret string
	index             int
}

// fields lists the keys in struct order.
func fields() []field {
	t := reflect.TypeOf(Config{})
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		k := f.Tag.Get("key")
		if k == "" || k == "-" {
			continue
		}
		out = append(out, field{key: k, help: f.Tag.Get("help"), secret: f.Tag.Get("secret"), index: i})
	}
	return out
}

// Keys returns every configuration key in documentation order.
func Keys() []string {
	var ks []string
	for _, f := range fields() {
		ks = append(ks, f.key)
	}
	return ks
}

// FlagName returns the flag for key: "poll_floor_ms" → "poll-floor-ms".
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// EnvName returns the environment variable for key: "poll_floor_ms" → "TASKBRIDGE_POLL_FLOOR_MS".
func EnvName(key string) string { return EnvPrefix + strings.ToUpper(key) }

// Loader registers the flags of every key on a FlagSet and, after parsing, resolves the
// effective configuration.
type Loader struct {
	fs      *flag.FlagSet
	flags   map[string]*string // key → raw flag value
	cfgPath *string
}

// Register adds --config and one flag per key to fs. Flags are strings parsed by the same
// rules as environment variables, so a bad flag value is reported with the key's name.
func Register(fs *flag.FlagSet) *Loader { return RegisterKeys(fs) }

// RegisterKeys is Register for a subset of keys (operator commands that need only the
// store, say); no keys means all. Keys without a flag still come from the file and the
// environment.
func RegisterKeys(fs *flag.FlagSet, keys ...string) *Loader {
	l := &Loader{fs: fs, flags: map[string]*string{}}
	l.cfgPath = fs.String("config", "", "YAML configuration `FILE` (also "+EnvPrefix+"CONFIG)")
	def := Default()
	for _, f := range fields() {
		if len(keys) > 0 && !slices.Contains(keys, f.key) {
			continue
		}
		v := new(string)
		*v = display(reflect.ValueOf(def).Elem().Field(f.index), f)
		if reflect.ValueOf(def).Elem().Field(f.index).Kind() == reflect.Bool {
			fs.Var(boolValue{stringValue{v}}, FlagName(f.key), f.help) // --kill-switch alone means true
		} else {
			fs.Var(stringValue{v}, FlagName(f.key), f.help)
		}
		l.flags[f.key] = v
	}
	return l
}

// stringValue is a flag.Value holding the raw string.
type stringValue struct{ p *string }

func (s stringValue) String() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}
func (s stringValue) Set(v string) error { *s.p = v; return nil }

// boolValue lets a boolean key's flag be given without a value.
type boolValue struct{ stringValue }

func (boolValue) IsBoolFlag() bool { return true }

// Load resolves the configuration after fs.Parse: defaults, then the file (from --config
// or TASKBRIDGE_CONFIG), then TASKBRIDGE_* variables from getenv, then the flags given on
// the command line. It does not Validate.
func (l *Loader) Load(getenv func(string) string) (*Config, error) {
	path := *l.cfgPath
	if path == "" {
		path = getenv(EnvPrefix + "CONFIG")
	}
	c := Default()
	if path != "" {
		if err := c.loadFile(path); err != nil {
			return nil, err
		}
	}
	var errs []error
	if err := c.applyEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	set := map[string]bool{}
	l.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range fields() {
		name := FlagName(f.key)
		if !set[name] || l.flags[f.key] == nil {
			continue
		}
		if err := c.setString(f, *l.flags[f.key], "flag --"+name); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// LoadFile returns defaults overlaid with the file at path and then the environment (as
// serve would see it), for "config check".
func LoadFile(path string, getenv func(string) string) (*Config, error) {
	c := Default()
	if err := c.loadFile(path); err != nil {
		return nil, err
	}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) applyEnv(getenv func(string) string) error {
	var errs []error
	for _, f := range fields() {
		name := EnvName(f.key)
		if v := getenv(name); v != "" {
			if err := c.setString(f, v, "env "+name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// loadFile overlays the YAML file at path. Every error carries "path:line".
func (c *Config) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(root.Content) == 0 {
		return nil // an empty file: defaults
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: the configuration must be a mapping of keys to values", path, doc.Line)
	}
	byKey := map[string]field{}
	for _, f := range fields() {
		byKey[f.key] = f
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		f, ok := byKey[k.Value]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key %q%s", where, k.Value, suggest(k.Value)))
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("%s: key %q given twice (first on line %d)", where, k.Value, prev))
			continue
		}
		seen[k.Value] = k.Line
		if err := c.setNode(f, v, data, where); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setNode sets one key from its YAML value node.
func (c *Config) setNode(f field, v *yaml.Node, file []byte, where string) error {
	fv := reflect.ValueOf(c).Elem().Field(f.index)
	switch {
	case fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Time{}):
		if v.Kind != yaml.MappingNode && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
			return fmt.Errorf("%s: %s: want a mapping", where, f.key)
		}
		// Decode the whole file strictly into {key: T, rest inline}, so unknown or
		// mistyped fields inside the section are reported with their absolute line.
		if err := decodeSection(fv, f.key, file); err != nil {
			return fmt.Errorf("%s: %s: %v", strings.SplitN(where, ":", 2)[0], f.key, err)
		}
	case fv.Kind() == reflect.Slice:
		var items []string
		switch v.Kind {
		case yaml.SequenceNode:
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode {
					return fmt.Errorf("%s:%d: %s: want a list of strings", strings.SplitN(where, ":", 2)[0], it.Line, f.key)
				}
				items = append(items, it.Value)
			}
		case yaml.ScalarNode:
			items = splitList(v.Value)
		default:
			return fmt.Errorf("%s: %s: want a list of strings", where, f.key)
		}
		fv.Set(reflect.ValueOf(items))
	default:
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: %s: want a single value, got a %s", where, f.key, kindName(v.Kind))
		}
		if err := setScalar(fv, f, v.Value); err != nil {
			return fmt.Errorf("%s: %s: %v", where, f.key, err)
		}
	}
	c.Sources[f.key] = where
	return nil
}

// setString sets one key from a flag or environment string.
func (c *Config) setString(f field, s, where string) error {
	fv := reflect.ValueOf(c).Elem().Field(f.index)
	switch {
	case fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Time{}):
		p := reflect.New(fv.Type())
		dec := yaml.NewDecoder(strings.NewReader(s))
		dec.KnownFields(true)
		if err := dec.Decode(p.Interface()); err != nil {
			return fmt.Errorf("%s: %s: %s", where, f.key, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		fv.Set(p.Elem())
	case fv.Kind() == reflect.Slice:
		fv.Set(reflect.ValueOf(splitList(s)))
	default:
		if err := setScalar(fv, f, s); err != nil {
			return fmt.Errorf("%s: %s: %v", where, f.key, err)
		}
	}
	c.Sources[f.key] = where
	return nil
}

// decodeSection decodes file's top-level key strictly into fv.
func decodeSection(fv reflect.Value, key string, file []byte) error {
	t := reflect.StructOf([]reflect.StructField{
		{Name: "V", Type: fv.Type(), Tag: reflect.StructTag(`yaml:"` + key + `"`)},
		{Name: "Rest", Type: reflect.TypeOf(map[string]any{}), Tag: `yaml:",inline"`},
	})
	p := reflect.New(t)
	dec := yaml.NewDecoder(bytes.NewReader(file))
	dec.KnownFields(true)
	if err := dec.Decode(p.Interface()); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return errors.New(strings.Join(te.Errors, "; "))
		}
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	fv.Set(p.Elem().Field(0))
	return nil
}

// setScalar parses s into a scalar field.
func setScalar(fv reflect.Value, f field, s string) error {
	switch fv.Interface().(type) {
	case string:
		fv.SetString(s)
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", s)
		}
		fv.SetBool(b)
	case int, int64:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", s)
		}
		fv.SetInt(n)
	case float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", s)
		}
		fv.SetFloat(x)
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration like 30s, 5m or 720h, got %q", s)
		}
		fv.SetInt(int64(d))
	case time.Time:
		t, err := parseDate(s)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(t))
	default:
		return fmt.Errorf("unsupported type %s", fv.Type())
	}
	return nil
}

// parseDate accepts YYYY-MM-DD (midnight UTC), an RFC 3339 time, or off/none/"" (no date).
func parseDate(s string) (time.Time, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "none", "never":
		return time.Time{}, nil
	}
	if t, err := time.Parse(DateLayout, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("want a date like 2027-07-28 (or off), got %q", s)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// suggest proposes the closest known key for a typo.
func suggest(k string) string {
	best, bestD := "", 4
	for _, f := range fields() {
		if d := editDistance(k, f.key); d < bestD {
			best, bestD = f.key, d
		}
	}
	if best == "" {
		return " (see docs/configuration.md)"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Validate checks the values make sense together. needUpstream is true for serve.
// Each problem names the key and where its value came from.
func (c *Config) Validate(needUpstream bool) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", c.source(key), key, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "want HOST:PORT, got %q", c.Listen)
	}
	if c.AdminEnabled() {
		if _, _, err := net.SplitHostPort(c.Admin); err != nil {
			bad("admin", "want HOST:PORT or off, got %q", c.Admin)
		}
	}
	switch {
	case c.Upstream != "" && c.UpstreamCmd != "":
		bad("upstream", "give one of upstream and upstream_cmd (%s), not both", c.source("upstream_cmd"))
	case c.Upstream == "" && c.UpstreamCmd == "" && needUpstream:
		bad("upstream", "required (or upstream_cmd): the URL of the SEP-2663 upstream, e.g. http://mcp-server:9000/mcp")
	case c.Upstream != "":
		if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("upstream", "want an http:// or https:// URL, got %q", redact.URL(c.Upstream))
		}
	}
	if !strings.HasPrefix(c.Store, "sqlite:") && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		bad("store", "want sqlite:PATH or postgres://…, got %q", MaskDSN(c.Store))
	} else if c.Store == "sqlite:" {
		bad("store", "sqlite: needs a file path, e.g. sqlite:/var/lib/taskbridge/tb.db")
	}
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, c.LogLevel) {
		bad("log_level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if !slices.Contains([]string{"warn", "refuse"}, c.LockDrift) {
		bad("lock_drift", "want warn or refuse, got %q", c.LockDrift)
	}
	if !slices.Contains([]string{"auto", "json", "console"}, c.LogFormat) {
		bad("log_format", "want auto, json or console, got %q", c.LogFormat)
	}
	positive := map[string]int64{
		"max_body": c.MaxBody, "poll_floor_ms": c.PollFloorMs, "poll_ceil_ms": c.PollCeilMs,
		"list_page_size": int64(c.ListPageSize), "poll_fault_budget": int64(c.PollFaultBudget),
	}
	for _, k := range []string{"max_body", "poll_floor_ms", "poll_ceil_ms", "list_page_size", "poll_fault_budget"} {
		if positive[k] <= 0 {
			bad(k, "must be positive, got %d", positive[k])
		}
	}
	c.validateBounds(bad)
	if c.PollFloorMs > c.PollCeilMs && c.PollCeilMs > 0 {
		bad("poll_floor_ms", "must not exceed poll_ceil_ms (%d), got %d", c.PollCeilMs, c.PollFloorMs)
	}
	durs := map[string]time.Duration{
		"max_ttl": c.MaxTTL, "heartbeat": c.Heartbeat, "create_timeout": c.CreateTimeout,
		"status_timeout": c.StatusTimeout, "cancel_timeout": c.CancelTimeout, "input_timeout": c.InputTimeout,
		"drain_timeout": c.DrainTimeout, "upstream_close_wait": c.UpstreamCloseWait, "upstream_term_wait": c.UpstreamTermWait, "drain_quiet": c.DrainQuiet, "report_window": c.ReportWindow,
	}
	for _, f := range fields() {
		if d, ok := durs[f.key]; ok && d <= 0 {
			bad(f.key, "must be a positive duration, got %s", d)
		}
	}
	if c.BodyReadTimeout <= 0 {
		bad("body_read_timeout", "must be a positive duration, got %s", c.BodyReadTimeout)
	}
	if c.MaxUpstreamInflight < 0 {
		bad("max_upstream_inflight", "must not be negative (0: no cap), got %d", c.MaxUpstreamInflight)
	}
	if c.SunsetWarn < 0 {
		bad("sunset_warn", "must not be negative, got %s", c.SunsetWarn)
	}
	if c.Auth.Enabled() {
		if _, err := auth.New(c.Auth); err != nil {
			bad("auth", "%v", err)
		}
	}
	c.validateTLS(bad)
	c.validateOTel(bad)
	c.validateOAuth(bad)
	return errors.Join(errs...)
}

// validateBounds checks the memory and connection bounds: each must be positive (a zero
// would mean "unbounded" to net/http).
func (c *Config) validateBounds(bad func(key, format string, args ...any)) {
	for _, b := range []struct {
		key string
		n   int64
	}{{"read_header_timeout", int64(c.ReadHeaderTimeout)}, {"idle_timeout", int64(c.IdleTimeout)},
		{"max_header_bytes", int64(c.MaxHeaderBytes)}, {"max_replay_bytes", c.MaxReplayBytes},
		{"max_session_info_bytes", int64(c.MaxSessionInfoBytes)}} {
		if b.n > 0 {
			continue
		}
		if strings.HasSuffix(b.key, "_timeout") {
			bad(b.key, "must be a positive duration, got %s", time.Duration(b.n))
		} else {
			bad(b.key, "must be positive, got %d", b.n)
		}
	}
}

// source returns where key's value came from.
func (c *Config) source(key string) string {
	if s, ok := c.Sources[key]; ok {
		return s
	}
	return "default"
}

// display renders a field's value as flags and the printed config show it (unmasked).
func display(fv reflect.Value, f field) string {
	switch v := fv.Interface().(type) {
	case time.Duration:
		return FormatDuration(v)
	case time.Time:
		if v.IsZero() {
			return "off"
		}
		if v.Equal(v.Truncate(24 * time.Hour)) {
			return v.Format(DateLayout)
		}
		return v.Format(time.RFC3339)
	case []string:
		return strings.Join(v, ",")
	case auth.Config:
		return ""
	}
	return fmt.Sprint(fv.Interface())
}

// FormatDuration prints d without zero tails: 24h, 1m30s, 10m (not 24h0m0s).
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
