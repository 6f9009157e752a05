package bridge

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// newTaskID mints a task id: 128 random bits, hex. Never derived from the upstream's id.
func newTaskID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the platform is broken; ids must not be weak
	}
	return hex.EncodeToString(b[:])
}

// newRequestID mints the id of a server→client request (an input relayed to the client).
func newRequestID() string { return "tb-" + newTaskID() }

// argsHash is the audit fingerprint of a call's arguments; the arguments are never stored.
func argsHash(args json.RawMessage) string {
	h := sha256.Sum256(args)
	return hex.EncodeToString(h[:])
}

// cursor is the opaque tasks/list position: base64url of {"t":createdAtMs,"i":id}.
type cursor struct {
	T int64  `json:"t"`
	I string `json:"i"`
}

var errBadCursor = jsonrpc.ErrInvalidParams.Wrapf("invalid cursor")

func encodeCursor(t *record.Task) string {
	b, _ := json.Marshal(cursor{T: t.CreatedAt.UnixMilli(), I: t.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*store.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errBadCursor
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.I == "" || c.T <= 0 {
		return nil, errBadCursor
	}
	return &store.Cursor{CreatedAt: time.UnixMilli(c.T).UTC(), ID: c.I}, nil
}
