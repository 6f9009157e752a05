// Package redact is the one place that turns an address that may carry credentials into
// the form that may be shown: in logs, store rows, status pages, command output and
// errors. An upstream URL such as http://user:pass@host/mcp?token=… is shown as
// http://host/mcp: no userinfo, no query, no fragment.
//
// Every display of a configured URL goes through URL; every error text that may quote one
// (a net/http error names the URL it failed on) goes through Text.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// URL returns raw without userinfo, query or fragment. A string that is not an absolute
// URL ("child CMD", "stdio:name", a bare path) comes back unchanged except that anything
// after a '?' is dropped and anything up to an '@' before the first '/' is dropped too.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fallback(raw)
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// fallback is URL for strings url.Parse cannot read as a URL with a host.
func fallback(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		end := strings.IndexByte(rest, '/')
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			s = s[:i+3] + rest[at+1:]
		}
	}
	return s
}

// urlInText finds URLs inside free text (error messages): a scheme, "://", then anything
// up to white space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// Text returns s with every URL in it redacted.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, URL)
}

// Error is Text of err's message ("" for nil).
func Error(err error) string {
	if err == nil {
		return ""
	}
	return Text(err.Error())
}

// MaxField is the most bytes of a client-supplied value (a JSON-RPC id, a method, a tool
// name, a task id) that a log line carries.
const MaxField = 128

// Field clips a client-supplied value for a log line to MaxField bytes (at a UTF-8
// boundary, marked with "…"), so a client cannot make one request write megabytes of log.
func Field(s string) string {
	if len(s) <= MaxField {
		return s
	}
	cut := MaxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
