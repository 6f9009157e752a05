package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/taskbridge/taskbridge/internal/redact"
)

// TestEnvPrefix is the prefix of variables the test suite uses (TASKBRIDGE_TEST_PG, …);
// they are never settings, and never warned about.
const TestEnvPrefix = EnvPrefix + "TEST_"

// UnknownEnv returns one warning per TASKBRIDGE_* variable in environ ("NAME=value"
// entries, as os.Environ gives) that is not a setting, naming the closest valid variable
// when one is close. The value is never repeated (it may be a secret).
func UnknownEnv(environ []string) []string {
	known := map[string]bool{EnvPrefix + "CONFIG": true}
	for _, k := range Keys() {
		known[EnvName(k)] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || known[name] || strings.HasPrefix(name, TestEnvPrefix) {
			continue
		}
		out = append(out, fmt.Sprintf("environment variable %s is not a taskbridge setting and is ignored%s", name, suggestEnv(name, known)))
	}
	return out
}

// suggestEnv names the known variable closest to name (case-insensitive), if close.
func suggestEnv(name string, known map[string]bool) string {
	u := strings.ToUpper(name)
	best, bestD := "", 4
	for k := range known {
		if d := editDistance(u, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (see docs/configuration.md)"
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// Change is one key whose value differs between two configurations; secrets are masked,
// so a Change may be logged.
type Change struct {
	Key  string `json:"key"`
	From string `json:"from"`
	To   string `json:"to"`
}

// String is "key: from → to".
func (c Change) String() string { return c.Key + ": " + c.From + " → " + c.To }

// Diff returns the keys whose values differ between a and b, in documentation order.
func Diff(a, b *Config) []Change {
	var out []Change
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for _, f := range fields() {
		fa, fb := va.Field(f.index), vb.Field(f.index)
		if reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		c := Change{Key: f.key, From: shown(fa, f), To: shown(fb, f)}
		if c.From == c.To { // a section changed inside: its fields may be secrets
			c.To = "(changed)"
		}
		out = append(out, c)
	}
	return out
}

// shown renders a value for a Change: masked when secret; a section only as "(set)" or
// "(none)", since its fields may be secrets.
func shown(fv reflect.Value, f field) string {
	if fv.Kind() == reflect.Struct && fv.Type().Name() != "Time" {
		if fv.IsZero() {
			return "(none)"
		}
		return "(set)"
	}
	s := display(fv, f)
	switch f.secret {
	case "true":
		s = MaskSecret(s)
	case "dsn":
		s = MaskDSN(s)
	case "url":
		s = redact.URL(s) // as Print shows it
	}
	if s == "" {
		return `""`
	}
	return s
}
