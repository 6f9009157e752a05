package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
)

// One reading of a message. JSON parsers disagree about an object that names a member
// twice: Go's encoding/json and JavaScript keep the last value, gjson (which the bridge
// reads routing fields with) the first, and Go's encoding/json also matches struct fields
// case-insensitively. A message that names the tool "search" to the bridge's checks and
// "delete" to the upstream must never get through, so Decode refuses it (-32600):
//
//   - a member name given twice in one object, at any depth, in any message;
//   - in the envelope of any message and at the top level of a request's params, two names
//     that differ only in case, and an envelope member spelled in another case ("Method").
//
// The scan runs after encoding/json has accepted the text (so it is valid JSON), in one
// pass without decoding values; a name is unescaped only when it contains a backslash.

// envelopeMembers are the members of Message, as the wire spells them.
var envelopeMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// maxLinearKeys is how many names an object may have before its duplicate check switches
// from comparing with each earlier name to a map (bounding the cost of a huge object).
const maxLinearKeys = 16

// keyScanner finds duplicate member names in valid JSON text.
type keyScanner struct {
	b    []byte
	i    int
	keys []jsonKey // names of the objects being scanned, innermost last (a stack)
}

// jsonKey is one member name: its raw bytes between the quotes and whether it has escapes.
type jsonKey struct {
	raw     []byte
	escaped bool
}

// name returns the key's decoded value.
func (k jsonKey) name() string {
	if !k.escaped {
		return string(k.raw)
	}
	var s string
	q := make([]byte, 0, len(k.raw)+2)
	q = append(append(append(q, '"'), k.raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return string(k.raw)
	}
	return s
}

func (k jsonKey) same(o jsonKey) bool {
	if !k.escaped && !o.escaped {
		return bytes.Equal(k.raw, o.raw)
	}
	return k.name() == o.name()
}

// checkDuplicateKeys returns a -32600 error for the first ambiguous member name of the
// message text b (valid JSON), or nil. One pass over the text.
func checkDuplicateKeys(b []byte) error {
	var stack [16]jsonKey // names of the open objects; deeper or wider ones grow it
	s := keyScanner{b: b, keys: stack[:0]}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil
	}
	return s.object(levelEnvelope)
}

// Levels of an object: the envelope and the top of params are checked for names that
// differ only in case too; every object for exact duplicates.
const (
	levelEnvelope = iota
	levelParams
	levelPlain
)

// value scans one value at s.i; a nested object is checked as a plain one.
func (s *keyScanner) value() error {
	s.ws()
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '{':
		return s.object(levelPlain)
	case '[':
		s.i++
		for {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				return nil
			}
			if err := s.value(); err != nil {
				return err
			}
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
			}
		}
	case '"':
		s.str()
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return nil
			}
			s.i++
		}
	}
	return nil
}

// object scans an object at s.i, checking its names.
func (s *keyScanner) object(level int) error {
	s.i++ // {
	base := len(s.keys)
	fold := level != levelPlain
	var seen map[string]bool // set once the object passes maxLinearKeys names
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			s.keys = s.keys[:base] // this object's names are done with
			return nil
		}
		k := s.str()
		if err := s.checkName(k, base, fold, &seen); err != nil {
			return err
		}
		if level == levelEnvelope {
			if err := envelopeSpelling(k); err != nil {
				return err
			}
		}
		s.ws()
		s.i++ // :
		var err error
		s.ws()
		switch {
		case s.i < len(s.b) && s.b[s.i] == '{' && level == levelEnvelope && string(k.raw) == "params":
			err = s.object(levelParams)
		default:
			err = s.value()
		}
		if err != nil {
			return within(err, k)
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

// checkName compares the name k with the earlier names of its object (s.keys[base:], or
// *seen once the object is large); fold also counts names that differ only in case.
func (s *keyScanner) checkName(k jsonKey, base int, fold bool, seen *map[string]bool) error {
	if *seen == nil {
		for _, prev := range s.keys[base:] {
			if prev.same(k) || (fold && prev.sameFold(k)) {
				return dupError(prev, k)
			}
		}
		s.keys = append(s.keys, k)
		if len(s.keys)-base > maxLinearKeys {
			*seen = make(map[string]bool, 2*maxLinearKeys)
			for _, prev := range s.keys[base:] {
				(*seen)[prev.key(fold)] = true
			}
		}
		return nil
	}
	n := k.key(fold)
	if (*seen)[n] {
		return dupError(k, k)
	}
	(*seen)[n] = true
	return nil
}

// key is the name as a map key: folded to lower case when names differing in case clash.
func (k jsonKey) key(fold bool) string {
	if fold {
		return strings.ToLower(k.name())
	}
	return k.name()
}

func (k jsonKey) sameFold(o jsonKey) bool {
	if !k.escaped && !o.escaped {
		return bytes.EqualFold(k.raw, o.raw)
	}
	return strings.EqualFold(k.name(), o.name())
}

// dupError is the error for name k clashing with the earlier prev; where is filled in by
// the enclosing objects (within).
type dupFound struct {
	prev, name string
	where      string // the path of the object holding them; "" for the message itself
}

func dupError(prev, k jsonKey) error {
	return &dupFound{prev: prev.name(), name: k.name()}
}

func (d *dupFound) Error() string { return "duplicate member" }

// within prefixes the path of a duplicate found inside the member k.
func within(err error, k jsonKey) error {
	if d, ok := err.(*dupFound); ok {
		if d.where == "" {
			d.where = k.name()
		} else {
			d.where = k.name() + "." + d.where
		}
	}
	return err
}

// envelopeSpelling refuses an envelope member spelled in another case ("Method"), which
// Go's encoding/json would read as the member while other readers would not.
func envelopeSpelling(k jsonKey) error {
	for _, m := range envelopeMembers {
		if len(k.raw) == len(m) && string(k.raw) != m && strings.EqualFold(string(k.raw), m) {
			return ErrInvalidRequest.Wrapf("member %q of the message must be spelled %q", clip(k.name()), m)
		}
	}
	return nil
}

// wireError turns what the scan found into the -32600 sent to the peer.
func wireError(err error) error {
	d, ok := err.(*dupFound)
	if !ok {
		return err
	}
	in := "the message"
	if d.where != "" {
		in = clip(d.where)
	}
	if d.prev != d.name {
		return ErrInvalidRequest.Wrapf("members %q and %q of %s differ only in case", clip(d.prev), clip(d.name), in)
	}
	return ErrInvalidRequest.Wrapf("member %q given twice in %s", clip(d.name), in)
}

// str scans a string at s.i (the opening quote) and returns its raw content: a short
// loop for short strings, two byte searches for long ones, a careful loop with escapes.
func (s *keyScanner) str() jsonKey {
	s.i++ // "
	start := s.i
	for end := min(len(s.b), s.i+24); s.i < end; s.i++ {
		switch s.b[s.i] {
		case '"':
			s.i++
			return jsonKey{raw: s.b[start : s.i-1]}
		case '\\':
			return s.escapedStr(start)
		}
	}
	j := bytes.IndexByte(s.b[s.i:], '"')
	if j < 0 {
		s.i = len(s.b)
		return jsonKey{raw: s.b[start:]}
	}
	if bytes.IndexByte(s.b[s.i:s.i+j], '\\') >= 0 {
		return s.escapedStr(start)
	}
	s.i += j + 1
	return jsonKey{raw: s.b[start : s.i-1]}
}

// escapedStr finishes a string that has escapes, from s.i.
func (s *keyScanner) escapedStr(start int) jsonKey {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return jsonKey{raw: s.b[start : s.i-1], escaped: true}
		}
		s.i++
	}
	return jsonKey{raw: s.b[start:], escaped: true}
}

func (s *keyScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// clip bounds a name quoted in an error (a client could send a megabyte-long one).
func clip(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "…"
}
