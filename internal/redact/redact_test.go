package redact

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://user:s3cret@up.internal:9000/mcp?token=abc#frag", "http://up.internal:9000/mcp"},
		{"https://up.example/mcp", "https://up.example/mcp"},
		{"http://tok@host/mcp", "http://host/mcp"},
		{"http://host/mcp?", "http://host/mcp"},
		{"child tbfixture --stdio", "child tbfixture --stdio"},
		{"stdio:tbfixture", "stdio:tbfixture"},
		{"http://us er:p@ss@host/x?y=z", "http://host/x"}, // unparseable: the fallback
		{"", ""},
	}
	for _, c := range cases {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	err := errors.New(`Post "http://bob:***@10.0.0.7:9000/mcp?token=CANARY": dial tcp 10.0.0.7:9000: connection refused`)
	got := Error(err)
	if strings.Contains(got, "CANARY") || strings.Contains(got, "bob") || strings.Contains(got, "token") {
		t.Fatalf("Error = %q, still carries credentials", got)
	}
	if !strings.Contains(got, `"http://10.0.0.7:9000/mcp"`) || !strings.Contains(got, "connection refused") {
		t.Fatalf("Error = %q, lost the useful part", got)
	}
	if Error(nil) != "" {
		t.Fatal("Error(nil) must be empty")
	}
}

func TestField(t *testing.T) {
	if got := Field("tools/call"); got != "tools/call" {
		t.Fatalf("short value changed: %q", got)
	}
	long := strings.Repeat("é", 200) // 400 bytes, 2-byte runes
	got := Field(long)
	if len(got) > MaxField+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Fatalf("Field(400 bytes) = %d bytes %q", len(got), got)
	}
}
