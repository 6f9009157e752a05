package jsonrpc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var benchMsg = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search","arguments":{"query":"quarterly report","limit":20,"filters":{"year":2026,"tags":["a","b","c"]}},"task":{"ttl":60000},"_meta":{"progressToken":"p-1"}}}`)

// BenchmarkDecode: one full decode of a request (envelope checked, params kept raw).
func BenchmarkDecode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(benchMsg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteFields: the routing fields read with gjson, payload untouched.
func BenchmarkRouteFields(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		r := gjson.GetManyBytes(benchMsg, "method", "params.name", "params.task", "params._meta.progressToken")
		if r[0].Str != "tools/call" {
			b.Fatal("method")
		}
	}
}

// benchLarge is a tools/call of about 1 MiB: 2,000 records of nested arguments.
var benchLarge = func() []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"ingest","arguments":{"records":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"title":"record %d","tags":["a","b","c"],"body":%q,"meta":{"owner":"u%d","size":%d,"ok":true}}`,
			i, i, strings.Repeat("lorem ipsum dolor sit amet ", 16), i%97, i*31)
	}
	b.WriteString(`]}}}`)
	return b.Bytes()
}()

// BenchmarkDecodeLarge: one full decode of a ~1 MiB request (the duplicate-key scan's
// cost grows with the message; this is the size where it shows).
func BenchmarkDecodeLarge(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchLarge)))
	for b.Loop() {
		if _, err := Decode(benchLarge); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicateKeyScan: the duplicate-key scan alone (part of Decode), on the
// ordinary request and on the ~1 MiB one.
func BenchmarkDuplicateKeyScan(b *testing.B) {
	for _, c := range []struct {
		name string
		msg  []byte
	}{{"small", benchMsg}, {"1MiB", benchLarge}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.msg)))
			for b.Loop() {
				if err := checkDuplicateKeys(c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
