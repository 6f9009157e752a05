package jsonobj

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// chain is what DropMembers must equal: the general editor, step by step.
func chain(raw []byte, keys, metaKeys []string) ([]byte, error) {
	o, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return o.Without(keys...).DropMeta(metaKeys...).Encode(), nil
}

// DropMembers answers every input exactly as Parse + Without + DropMeta + Encode do:
// the same bytes, or an error where they fail.
func TestDropMembersEqualsChain(t *testing.T) {
	keys, meta := []string{"resultType", "ttlMs", "cacheScope"}, []string{"io.modelcontextprotocol/serverInfo"}
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	inputs := []string{
		`{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`,
		`{"resultType":"complete"}`,
		`{}`,
		` { "b" : 1 ,  "a":{"z": [1, 2.50e3, "\u00e9"] }, "resultType" : "complete" } `,
		`{"isError":false,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"},"x":{"y":1}},"resultType":"complete"}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[]}`,
		`{"_meta": { "a" : 1 } ,"c":2}`,
		`{"_meta":{},"c":2}`,
		`{"_meta":null,"c":2}`,
		`{"_meta":"text","c":2}`,
		`{"_meta":{"a":1,"a":2},"c":2}`,
		`{"c":1,"resultType":"x","c":2}`,
		`{"c":1,"_meta":{"a":1},"_meta":{"b":2}}`,
		`{"result\u0054ype":"complete","ttlMs":5,"cacheScope":"user","keep":true}`,
		`{"text":"<&>\u2028","n":-0.0e-0,"t":true,"f":null}`,
		`{` + strings.Join(many, ",") + `,"resultType":"complete"}`,
		`[1,2]`,
		`"s"`,
		``,
		`{"a":1`,
		`{"a":1}{"b":2}`,
		`{"a":01}`,
		`{"a":1,}`,
		`{a:1}`,
	}
	for _, in := range inputs {
		want, werr := chain([]byte(in), keys, meta)
		got, gerr := DropMembers([]byte(in), keys, meta)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Errorf("DropMembers(%s)\n got %s (err %v)\nwant %s (err %v)", in, got, gerr, want, werr)
		}
	}
}

// The fast path keeps every kept member's bytes: order, spacing inside values, escapes,
// number spellings.
func TestDropMembersKeepsBytes(t *testing.T) {
	in := `{"structuredContent":{"b":1, "a":"\u00e9"},"resultType":"complete","n":1.50,"content":[ ]}`
	got, err := DropMembers([]byte(in), []string{"resultType"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"structuredContent":{"b":1, "a":"\u00e9"},"n":1.50,"content":[ ]}`; string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func BenchmarkDropMembers(b *testing.B) {
	in := []byte(`{"content":[{"type":"text","text":"hello, this is the tool's answer"}],"structuredContent":{"n":1},"isError":false,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u","version":"1"},"trace":"x"},"resultType":"complete"}`)
	keys, meta := []string{"resultType", "ttlMs", "cacheScope"}, []string{"io.modelcontextprotocol/serverInfo"}
	b.Run("chain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = chain(in, keys, meta)
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = DropMembers(in, keys, meta)
		}
	})
}
