package jsonobj

import (
	"encoding/json"
	"slices"

	"github.com/tidwall/gjson"
)

// DropMembers is Parse, Without(keys...), DropMeta(metaKeys...) and Encode in one pass
// over raw, for the hot path that only removes members (a 2026-07-28 result losing
// resultType and _meta's serverInfo for a 2025-11-25 client). It returns exactly what that
// chain returns, without decoding anything: gjson finds the members' bytes and the kept
// ones are copied as written. Input the chain treats specially (not valid JSON, duplicate
// keys at the top or in _meta, an _meta that is not an object) takes the chain itself, so
// errors and edge cases stay those of Parse.
func DropMembers(raw []byte, keys, metaKeys []string) (json.RawMessage, error) {
	if out, ok := dropFast(raw, keys, metaKeys); ok {
		return out, nil
	}
	o, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return o.Without(keys...).DropMeta(metaKeys...).Encode(), nil
}

// maxFastMembers bounds the members the fast path checks for duplicates one by one (a
// result has a handful); a larger object takes the general chain.
const maxFastMembers = 64

// dropFast is DropMembers for ordinary input; false sends the input to the general chain.
func dropFast(raw []byte, keys, metaKeys []string) (json.RawMessage, bool) {
	if !gjson.ValidBytes(raw) {
		return nil, false
	}
	top := gjson.ParseBytes(raw)
	if !top.IsObject() {
		return nil, false
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	var seen []string
	ok := true
	top.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if len(seen) == maxFastMembers || slices.Contains(seen, key) {
			ok = false // duplicates: Without and Set have their own rules
			return false
		}
		seen = append(seen, key)
		if slices.Contains(keys, key) {
			return true
		}
		val := v.Raw
		if key == "_meta" {
			meta, keep, fine := metaWithout(v, metaKeys)
			if !fine {
				ok = false
				return false
			}
			if !keep {
				return true
			}
			val = meta
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, val...)
		return true
	})
	if !ok {
		return nil, false
	}
	return append(out, '}'), true
}

// metaWithout re-encodes the _meta object v without metaKeys, as DropMeta does (members
// joined compactly, their bytes kept); keep is false when nothing is left. fine is false
// for what DropMeta handles otherwise: an _meta that is not an object, or duplicate keys.
func metaWithout(v gjson.Result, metaKeys []string) (meta string, keep, fine bool) {
	if !v.IsObject() {
		return "", false, false
	}
	b := []byte{'{'}
	var seen []string
	fine = true
	v.ForEach(func(k, mv gjson.Result) bool {
		key := k.String()
		if len(seen) == maxFastMembers || slices.Contains(seen, key) {
			fine = false
			return false
		}
		seen = append(seen, key)
		if slices.Contains(metaKeys, key) {
			return true
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, k.Raw...)
		b = append(b, ':')
		b = append(b, mv.Raw...)
		return true
	})
	if !fine || len(b) == 1 {
		return "", false, fine
	}
	return string(append(b, '}')), true, true
}
