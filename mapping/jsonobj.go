package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// member is one top-level member of a JSON object, kept as the exact bytes it arrived in:
// rewriting a payload touches only the members it has to, and everything else (order,
// spelling, number formats, escapes) passes through byte for byte.
type member struct {
	key    string          // decoded key
	rawKey []byte          // the key as written, quotes included
	value  json.RawMessage // the value as written
}

var errNotObject = errors.New("not a JSON object")

// objectMembers splits a JSON object into its top-level members, in order, duplicates kept.
// Only the top level is decoded.
func objectMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		span := raw[before:dec.InputOffset()]
		rawKey := span[bytes.IndexByte(span, '"'):]
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, rawKey: rawKey, value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the object", errNotObject)
	}
	return ms, nil
}

// arrayElements splits a JSON array into its elements, as written.
func arrayElements(raw []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, errors.New("not a JSON array")
	}
	var out []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the array")
	}
	return out, nil
}

// newMember builds a member with a freshly encoded key.
func newMember(key string, value json.RawMessage) member {
	return member{key: key, rawKey: encodeKey(key), value: value}
}

func encodeKey(key string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

// encodeObject joins members back into an object.
func encodeObject(ms []member) json.RawMessage {
	n := 2
	for _, m := range ms {
		n += len(m.rawKey) + len(m.value) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.rawKey...)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return append(b, '}')
}

func encodeArray(els []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, e := range els {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// without returns ms minus every member named by keys (all duplicates included).
func without(ms []member, keys ...string) []member {
	out := ms[:0:0]
	for _, m := range ms {
		drop := false
		for _, k := range keys {
			if m.key == k {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, m)
		}
	}
	return out
}

// lookup returns the value of the last member named key (JSON decoders keep the last of
// duplicate keys, so this is what any peer will read).
func lookup(ms []member, key string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return ms[i].value, true
		}
	}
	return nil, false
}

// set replaces the member named key (all duplicates) with one holding value, at the place of
// the last duplicate, or appends it.
func set(ms []member, key string, value json.RawMessage) []member {
	last := -1
	for i, m := range ms {
		if m.key == key {
			last = i
		}
	}
	if last < 0 {
		return append(ms[:len(ms):len(ms)], newMember(key, value))
	}
	out := make([]member, 0, len(ms))
	for i, m := range ms {
		switch {
		case i == last:
			m.value = value
			out = append(out, m)
		case m.key != key:
			out = append(out, m)
		}
	}
	return out
}

// isObject reports whether v is a JSON object (by its first byte; v is a decoded value).
func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// setMeta sets _meta[key] = value, keeping every other _meta key as written. A _meta that is
// absent, null or not an object is replaced by a fresh one.
func setMeta(ms []member, key string, value json.RawMessage) []member {
	var meta []member
	if old, ok := lookup(ms, "_meta"); ok && isObject(old) {
		if m, err := objectMembers(old); err == nil {
			meta = m
		}
	}
	meta = set(meta, key, value)
	return set(ms, "_meta", encodeObject(meta))
}

// dropMetaKey removes _meta[key]; _meta goes entirely when nothing else is left in it or it
// is not an object.
func dropMetaKey(ms []member, key string) []member {
	old, ok := lookup(ms, "_meta")
	if !ok {
		return ms
	}
	meta, err := objectMembers(old)
	if err != nil {
		return without(ms, "_meta")
	}
	meta = without(meta, key)
	if len(meta) == 0 {
		return without(ms, "_meta")
	}
	return set(ms, "_meta", encodeObject(meta))
}
