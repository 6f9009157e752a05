package jsonrpc

import (
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
