package forward

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

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
