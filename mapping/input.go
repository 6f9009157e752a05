package mapping

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// The server→client requests a legacy client can be sent for an upstream input request.
const (
	MethodElicitationCreate     = "elicitation/create"
	MethodSamplingCreateMessage = "sampling/createMessage"
	MethodRootsList             = "roots/list"
)

// InputToLegacy turns one upstream input request into the server→client request a legacy
// client gets: the method is kept (elicitation/create, sampling/createMessage, roots/list;
// anything else is ErrUnsupportedInput), the params gain _meta[related-task] = {taskId:
// bridgeTaskID} (other _meta keys kept, a related-task already there replaced), and a
// URL-mode elicitation gets elicitationId = ElicitationID(bridgeTaskID, key), replacing any.
// With an empty bridgeTaskID (an MRTR round before a task exists) no related-task is added.
// Absent or null params become {}; params that are not an object are an error.
func InputToLegacy(bridgeTaskID, key string, in sep2663.InputRequest) (method string, params json.RawMessage, err error) {
	switch in.Method {
	case MethodElicitationCreate, MethodSamplingCreateMessage, MethodRootsList:
	default:
		return "", nil, fmt.Errorf("%w: %q", ErrUnsupportedInput, truncate(in.Method, 64))
	}
	var ms jsonobj.Object
	if len(in.Params) > 0 && string(in.Params) != "null" {
		if ms, err = jsonobj.Parse(in.Params); err != nil {
			return "", nil, fmt.Errorf("mapping: input request %q params: %w", in.Method, err)
		}
	}
	if in.Method == MethodElicitationCreate {
		if raw, ok := ms.Get("mode"); ok {
			var mode string
			if json.Unmarshal(raw, &mode) == nil && mode == "url" {
				id, _ := json.Marshal(ElicitationID(bridgeTaskID, key))
				ms = ms.Set("elicitationId", id)
			}
		}
	}
	if bridgeTaskID == "" {
		// An MRTR round before any task exists: the request belongs to the open call,
		// not to a task the client knows, so it carries no related-task.
		return in.Method, ms.Encode(), nil
	}
	related, err := json.Marshal(legacy.RelatedTask{TaskID: bridgeTaskID})
	if err != nil {
		return "", nil, err
	}
	return in.Method, ms.SetMeta(legacy.MetaRelatedTask, related).Encode(), nil
}

// ElicitationID is the elicitationId synthesized for a URL-mode elicitation (2026-07-28
// dropped the field; 2025-11-25 requires it): the hex SHA-256 of a domain tag and the
// length-prefixed (bridge task id, input key). It is stable across polls and replicas, so
// a re-delivered request carries the same id, and it reveals neither part.
func ElicitationID(bridgeTaskID, key string) string {
	h := sha256.New()
	h.Write([]byte("taskbridge/elicitationId/v1\x00"))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(bridgeTaskID)))
	h.Write(n[:])
	h.Write([]byte(bridgeTaskID))
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// InputResponseToModern turns a legacy client's result for an input request into an
// InputResponse for tasks/update: _meta[related-task] is removed (and _meta with it when
// nothing else is left, or when it is not an object); content, action and every other field
// keep their bytes. The answer is matched to its task by the JSON-RPC id the bridge issued,
// never by this _meta (design §9). Non-object results are an error.
func InputResponseToModern(result json.RawMessage) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(result)
	if err != nil {
		return nil, fmt.Errorf("mapping: input response: %w", err)
	}
	return ms.DropMeta(legacy.MetaRelatedTask).Encode(), nil
}
