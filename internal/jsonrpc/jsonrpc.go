// Package jsonrpc is the one JSON-RPC 2.0 message layer shared by both protocol faces.
//
// Params, results and error data stay json.RawMessage: a face reads the routing fields it
// needs (with gjson) and passes everything else through byte for byte. Nothing here knows
// about MCP eras; it only enforces JSON-RPC 2.0 framing rules.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Version is the only JSON-RPC version spoken.
const Version = "2.0"

// Message is one JSON-RPC 2.0 message: a request (Method and ID), a notification (Method,
// no ID), or a response (ID and exactly one of Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      ID              `json:"id,omitzero"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// ID is a JSON-RPC id kept as its raw JSON text (a string or a number), so that it is
// echoed back exactly as the peer wrote it. The zero ID means "absent".
type ID struct{ raw string }

// StringID returns an ID whose JSON form is the quoted string s.
func StringID(s string) ID { b, _ := json.Marshal(s); return ID{string(b)} }

// IntID returns a numeric ID.
func IntID(n int64) ID { return ID{strconv.FormatInt(n, 10)} }

// RawID wraps already-encoded JSON (a string or number literal). It is not validated.
func RawID(raw []byte) ID { return ID{string(raw)} }

// IsZero reports whether the id is absent.
func (id ID) IsZero() bool { return id.raw == "" }

// IsNull reports whether the id is the JSON literal null (only legal on parse-error replies).
func (id ID) IsNull() bool { return id.raw == "null" }

// Raw returns the id's JSON text, e.g. `"abc"` or `7`.
func (id ID) Raw() string { return id.raw }

// String returns a readable form: the string value for string ids, the digits for numbers.
func (id ID) String() string {
	var s string
	if json.Unmarshal([]byte(id.raw), &s) == nil {
		return s
	}
	return id.raw
}

// MarshalJSON implements json.Marshaler.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.raw == "" {
		return []byte("null"), nil
	}
	return []byte(id.raw), nil
}

// UnmarshalJSON accepts a string, a number or null.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errors.New("empty id")
	}
	switch b[0] {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	case 'n':
		if string(b) != "null" {
			return fmt.Errorf("invalid id %q", b)
		}
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("id must be a string or a number: %w", err)
		}
	}
	id.raw = string(b)
	return nil
}

// IsRequest reports whether m is a request (has a method and an id).
func (m *Message) IsRequest() bool { return m.Method != "" && !m.ID.IsZero() }

// IsNotification reports whether m is a notification (a method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID.IsZero() }

// IsResponse reports whether m is a response (no method).
func (m *Message) IsResponse() bool { return m.Method == "" }

// Decode parses one JSON-RPC message and checks the framing rules. A batch (JSON array) is
// refused: neither MCP 2025-11-25 nor 2026-07-28 allows batching. So is a message that
// could be read two ways: a member name given twice at any depth, or envelope and params
// names that differ only in case (dupkeys.go). The returned error is a *Error ready to
// send (-32700 for bad JSON, -32600 for a bad envelope).
func Decode(b []byte) (*Message, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, ErrParse.Wrapf("empty body")
	}
	if b[0] == '[' {
		return nil, ErrInvalidRequest.Wrapf("batches are not supported")
	}
	if b[0] != '{' {
		return nil, ErrParse.Wrapf("not a JSON object")
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		if _, ok := err.(*json.SyntaxError); ok || !json.Valid(b) {
			return nil, ErrParse.Wrapf("%v", err)
		}
		return nil, ErrInvalidRequest.Wrapf("%v", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if err := checkDuplicateKeys(b); err != nil {
		return nil, wireError(err) // one reading of every message (dupkeys.go)
	}
	return &m, nil
}

func (m *Message) check() error {
	if m.JSONRPC != Version {
		return ErrInvalidRequest.Wrapf(`"jsonrpc" must be "2.0"`)
	}
	if m.Method != "" {
		if m.Result != nil || m.Error != nil {
			return ErrInvalidRequest.Wrapf("a request carries no result or error")
		}
		if m.ID.IsNull() {
			return ErrInvalidRequest.Wrapf("a request id must not be null")
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && !bytes.Equal(m.Params, []byte("null")) {
			return ErrInvalidRequest.Wrapf("params must be an object")
		}
		return nil
	}
	if m.ID.IsZero() {
		return ErrInvalidRequest.Wrapf("message has neither method nor id")
	}
	if (m.Result == nil) == (m.Error == nil) {
		return ErrInvalidRequest.Wrapf("a response carries exactly one of result and error")
	}
	return nil
}

// Encode returns the wire form of m, with "jsonrpc":"2.0" set.
func Encode(m *Message) ([]byte, error) {
	m.JSONRPC = Version
	return json.Marshal(m)
}

// NewRequest builds a request. params may be json.RawMessage, []byte holding JSON, or any
// value that encodes to a JSON object.
func NewRequest(id ID, method string, params any) (*Message, error) {
	p, err := raw(params)
	if err != nil {
		return nil, err
	}
	return &Message{JSONRPC: Version, ID: id, Method: method, Params: p}, nil
}

// NewNotification builds a notification.
func NewNotification(method string, params any) (*Message, error) {
	p, err := raw(params)
	if err != nil {
		return nil, err
	}
	return &Message{JSONRPC: Version, Method: method, Params: p}, nil
}

// NewResult builds a success response.
func NewResult(id ID, result any) (*Message, error) {
	r, err := raw(result)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = json.RawMessage("{}")
	}
	return &Message{JSONRPC: Version, ID: id, Result: r}, nil
}

// NewErrorResponse builds an error response from any error (see AsError).
func NewErrorResponse(id ID, err error) *Message {
	if id.IsZero() {
		id = ID{"null"}
	}
	return &Message{JSONRPC: Version, ID: id, Error: AsError(err)}
}

func raw(v any) (json.RawMessage, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return t, nil
	case []byte:
		return json.RawMessage(t), nil
	default:
		return json.Marshal(v)
	}
}
