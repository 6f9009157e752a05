package config

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/internal/auth"
)

// Group is one topic of the help output and of docs/configuration.md.
type Group struct {
	Title string
	Keys  []string
}

// topics orders the help by what an operator is doing. A key not listed here falls into a
// topic by its prefix (topicOf), else into "Other settings", so a new key is never hidden.
var topics = []Group{
	{"Listeners", []string{"listen", "admin", "public_metrics", "allowed_origins", "max_body"}},
	{"Upstream", []string{"upstream", "upstream_cmd", "upstream_authorization", "upstream_close_wait", "upstream_term_wait",
		"create_timeout", "status_timeout", "cancel_timeout", "input_timeout"}},
	{"Store", []string{"store", "max_result_bytes", "audit_retention", "purge_interval"}},
	{"Logs", []string{"log_level", "log_format", "access_log"}},
	{"Tasks and polling", []string{"poll_floor_ms", "poll_ceil_ms", "max_ttl", "heartbeat", "list_page_size", "tool_task_support"}},
	{"Fallback for upstreams without tasks", []string{"host_allow", "host_deny", "no_hosting", "host_workers"}},
	{"Limits per principal", []string{"max_concurrent_tasks", "request_rate", "request_burst"}},
	{"Retirement, kill switch and drain", []string{"kill_switch", "sunset", "sunset_warn", "drain_timeout", "drain_quiet", "report_window", "lock", "lock_drift"}},
	{"Authentication", []string{"auth"}},
}

// topicOf places a key no topic lists, by its prefix.
func topicOf(key string) string {
	switch {
	case strings.HasPrefix(key, "tls_"), strings.HasPrefix(key, "admin_"), strings.HasPrefix(key, "listen_"):
		return "Listeners"
	case strings.HasPrefix(key, "upstream_"):
		return "Upstream"
	case strings.HasPrefix(key, "log_"):
		return "Logs"
	case strings.HasPrefix(key, "host_"):
		return "Fallback for upstreams without tasks"
	case strings.HasPrefix(key, "auth"), strings.HasPrefix(key, "api_key"), strings.HasPrefix(key, "jwt"):
		return "Authentication"
	case strings.HasPrefix(key, "max_"), strings.HasPrefix(key, "request_"):
		return "Limits per principal"
	case strings.HasPrefix(key, "sunset"), strings.HasPrefix(key, "drain_"):
		return "Retirement, kill switch and drain"
	}
	return "Other settings"
}

// Groups returns keys (all keys when none are given) by topic, in topic order and, within
// a topic, in the order the topic lists them (unlisted keys last, in struct order).
func Groups(keys ...string) []Group {
	if len(keys) == 0 {
		keys = Keys()
	}
	byTitle := map[string]*Group{}
	var order []string
	add := func(title, key string) {
		g := byTitle[title]
		if g == nil {
			g = &Group{Title: title}
			byTitle[title] = g
		}
		g.Keys = append(g.Keys, key)
	}
	listed := map[string]bool{}
	for _, t := range topics {
		order = append(order, t.Title)
		for _, k := range t.Keys {
			if slices.Contains(keys, k) {
				add(t.Title, k)
				listed[k] = true
			}
		}
	}
	order = append(order, "Other settings")
	for _, k := range keys {
		if !listed[k] && isKey(k) {
			add(topicOf(k), k)
		}
	}
	var out []Group
	for _, title := range order {
		if g := byTitle[title]; g != nil {
			out = append(out, *g)
		}
	}
	return out
}

func isKey(k string) bool { _, ok := fieldOf(k); return ok }

// fieldOf finds the table entry of key.
func fieldOf(key string) (field, bool) {
	for _, f := range fields() {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

// valueNames overrides the value placeholder of keys whose type alone says too little.
var valueNames = map[string]string{
	"lock": "FILE", "listen": "ADDR", "admin": "ADDR", "upstream": "URL", "upstream_cmd": "CMD", "upstream_authorization": "VALUE",
	"store": "DSN", "log_level": "LEVEL", "log_format": "FORMAT", "max_body": "BYTES", "max_result_bytes": "BYTES",
	"tool_task_support": "TOOL=MODE,…", "sunset": "DATE|off",
}

// ValueType names key's value in help: ADDR, URL, DURATION, N, LIST, …; "BOOL" for
// booleans (which may also be given alone: --kill-switch).
func ValueType(key string) string {
	if v, ok := valueNames[key]; ok {
		return v
	}
	f, ok := fieldOf(key)
	if !ok {
		return "VALUE"
	}
	switch reflect.ValueOf(Config{}).Field(f.index).Interface().(type) {
	case bool:
		return "BOOL"
	case time.Duration:
		return "DURATION"
	case time.Time:
		return "DATE"
	case int, int64:
		return "N"
	case float64:
		return "NUMBER"
	case []string:
		return "LIST"
	case auth.Config:
		return "YAML"
	}
	return "STRING"
}

// Help returns key's one-line description.
func Help(key string) string {
	f, _ := fieldOf(key)
	return f.help
}

// DefaultString returns key's default as a flag would take it; "" when empty, false or 0
// (the help text says what 0 means).
func DefaultString(key string) string {
	f, ok := fieldOf(key)
	if !ok {
		return ""
	}
	s := display(reflect.ValueOf(Default()).Elem().Field(f.index), f)
	if (s == "false" && ValueType(key) == "BOOL") || s == "0" {
		return ""
	}
	return s
}
