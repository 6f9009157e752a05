// Package jsonobj is taskbridge's one order-preserving JSON object splicer. A payload the
// bridge edits (capabilities that gain or lose an extension, a result that loses
// resultType, params that gain the 2026-07-28 envelope) is split into its top-level members
// as the exact bytes they arrived in; only the members that change are rewritten, and
// everything else (member order, spelling, number formats, escapes) passes through byte for
// byte. Only the top level is decoded. Every editor of a forwarded payload uses it: no code
// path decodes an object into a Go map and encodes it again (which re-sorts its keys).
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Member is one top-level member of a JSON object, kept as written.
type Member struct {
	Key    string          // decoded key
	RawKey []byte          // the key as written, quotes included
	Value  json.RawMessage // the value as written
}

// Object is a JSON object's members in order, duplicates kept. Its methods never modify the
// receiver's backing array: an edit returns a new Object.
type Object []Member

// ErrNotObject is returned by Parse for input that is not one JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Parse splits a JSON object into its top-level members, in order, duplicates kept.
func Parse(raw []byte) (Object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ErrNotObject
	}
	var ms Object
	for dec.More() {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, ErrNotObject
		}
		span := raw[before:dec.InputOffset()]
		rawKey := span[bytes.IndexByte(span, '"'):]
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, Member{Key: key, RawKey: rawKey, Value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the object", ErrNotObject)
	}
	return ms, nil
}

// ParseOrEmpty is Parse, except that empty input and null are an empty object.
func ParseOrEmpty(raw []byte) (Object, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return Object{}, nil
	}
	return Parse(raw)
}

// Elements splits a JSON array into its elements, as written.
func Elements(raw []byte) ([]json.RawMessage, error) {
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

// NewMember builds a member with a freshly encoded key.
func NewMember(key string, value json.RawMessage) Member {
	return Member{Key: key, RawKey: Quote(key), Value: value}
}

// Quote encodes s as a JSON string without HTML escaping.
func Quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Encode joins the members back into an object.
func (o Object) Encode() json.RawMessage {
	n := 2
	for _, m := range o {
		n += len(m.RawKey) + len(m.Value) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.RawKey...)
		b = append(b, ':')
		if m.Value == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, m.Value...)
		}
	}
	return append(b, '}')
}

// EncodeArray joins elements back into an array.
func EncodeArray(els []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, e := range els {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// Without returns o minus every member named by keys (all duplicates included).
func (o Object) Without(keys ...string) Object {
	out := o[:0:0]
	for _, m := range o {
		drop := false
		for _, k := range keys {
			if m.Key == k {
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

// Get returns the value of the last member named key (JSON decoders keep the last of
// duplicate keys, so this is what any peer will read).
func (o Object) Get(key string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			return o[i].Value, true
		}
	}
	return nil, false
}

// Has reports whether a member named key exists.
func (o Object) Has(key string) bool { _, ok := o.Get(key); return ok }

// Set replaces the member named key (all duplicates) with one holding value, at the place
// of the last duplicate, or appends it.
func (o Object) Set(key string, value json.RawMessage) Object {
	last := -1
	for i, m := range o {
		if m.Key == key {
			last = i
		}
	}
	if last < 0 {
		return append(o[:len(o):len(o)], NewMember(key, value))
	}
	out := make(Object, 0, len(o))
	for i, m := range o {
		switch {
		case i == last:
			m.Value = value
			out = append(out, m)
		case m.Key != key:
			out = append(out, m)
		}
	}
	return out
}

// SetDefault sets key to value only when no member has that key.
func (o Object) SetDefault(key string, value json.RawMessage) Object {
	if o.Has(key) {
		return o
	}
	return o.Set(key, value)
}

// IsObject reports whether v is a JSON object (by its first byte; v is a decoded value).
func IsObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// Child returns the member key as an Object: absent, null or not an object is an empty one.
func (o Object) Child(key string) Object {
	if v, ok := o.Get(key); ok && IsObject(v) {
		if c, err := Parse(v); err == nil {
			return c
		}
	}
	return Object{}
}

// SetMeta sets _meta[key] = value, keeping every other _meta key as written. A _meta that
// is absent, null or not an object is replaced by a fresh one.
func (o Object) SetMeta(key string, value json.RawMessage) Object {
	return o.Set("_meta", o.Child("_meta").Set(key, value).Encode())
}

// DropMeta removes the named _meta keys; _meta goes entirely when nothing else is left in
// it or it is not an object.
func (o Object) DropMeta(keys ...string) Object {
	return o.editChild("_meta", func(meta Object) Object { return meta.Without(keys...) })
}

// DropChildKeys removes the named keys of the object member key; the member goes entirely
// when nothing is left in it. A member that is not an object is left alone.
func (o Object) DropChildKeys(key string, keys ...string) Object {
	v, ok := o.Get(key)
	if !ok || !IsObject(v) {
		return o
	}
	return o.editChild(key, func(c Object) Object { return c.Without(keys...) })
}

// editChild rewrites the object member key with fn; an empty result removes it, and so
// does a member that cannot be parsed as an object.
func (o Object) editChild(key string, fn func(Object) Object) Object {
	old, ok := o.Get(key)
	if !ok {
		return o
	}
	c, err := Parse(old)
	if err != nil {
		return o.Without(key)
	}
	if c = fn(c); len(c) == 0 {
		return o.Without(key)
	}
	return o.Set(key, c.Encode())
}

// Edit parses raw as an object, applies fn, and encodes the result.
func Edit(raw []byte, fn func(Object) Object) (json.RawMessage, error) {
	o, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return fn(o).Encode(), nil
}
