package jsonrpc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestOwnCodesCollideWithNothing: taskbridge's own codes are distinct, inside the range MCP
// 2026-07-28 leaves to implementations, and clear of every code either revision, its draft
// builds or the TypeScript SDK gives a meaning.
func TestOwnCodesCollideWithNothing(t *testing.T) {
	taken := map[int64]string{-32000: "TypeScript SDK", -32001: "TypeScript SDK, draft 2026 HeaderMismatch",
		-32002: "2025-11-25 resource not found (retired)", -32003: "draft 2026", -32004: "draft 2026",
		-32042: "2025-11-25 URL elicitation required (retired)"}
	seen := map[int64]bool{}
	for _, c := range Codes {
		if seen[c.Code] {
			t.Errorf("code %d listed twice", c.Code)
		}
		seen[c.Code] = true
		if c.Owner != "taskbridge" {
			continue
		}
		if c.Code > -32000 || c.Code < -32019 {
			t.Errorf("%s (%d) is outside the implementation range -32019..-32000", c.Name, c.Code)
		}
		if what, ok := taken[c.Code]; ok {
			t.Errorf("%s (%d) collides with %s", c.Name, c.Code, what)
		}
	}
}

// TestIsMatchesByCode: errors.Is on a coded error looks at the code only.
func TestIsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", NewError(CodeOverloaded, "too many unfinished tasks").WithData(map[string]any{"reason": "x"}))
	if !errors.Is(err, ErrOverloaded) {
		t.Error("errors.Is(overloaded refusal, ErrOverloaded) = false")
	}
	if errors.Is(err, ErrUpstream) {
		t.Error("errors.Is matched another code")
	}
}

// TestCodesDocumented: docs/troubleshooting.md lists every code of the table.
func TestCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		if !strings.Contains(string(b), fmt.Sprintf("`%d`", c.Code)) {
			t.Errorf("docs/troubleshooting.md does not list `%d` (%s)", c.Code, c.Name)
		}
	}
}
