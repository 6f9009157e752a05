package legacy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func protoI64(v int64) *int64 { return &v }

var protoLeaf = &struct{}{}

// wireCases pin every 2025-11-25 wire type: value → exact JSON → value.
var wireCases = []struct {
	name string
	v    any // a pointer to the value
	json string
}{
	{"Task/full", &Task{
		TaskID: "786512e2-9e0d-44bd-8f29-789f320fe840", Status: StatusWorking,
		StatusMessage: "The operation is now in progress.",
		CreatedAt:     "2025-11-25T10:30:00Z", LastUpdatedAt: "2025-11-25T10:40:00Z",
		TTL: protoI64(60000), PollInterval: protoI64(5000),
	}, `{"taskId":"786512e2-9e0d-44bd-8f29-789f320fe840","status":"working","statusMessage":"The operation is now in progress.","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:40:00Z","ttl":60000,"pollInterval":5000}`},
	{"Task/ttl null, optional fields absent", &Task{
		TaskID: "t1", Status: StatusCompleted,
		CreatedAt: "2026-11-29T07:21:21.240Z", LastUpdatedAt: "2026-11-29T07:21:22.242Z",
	}, `{"taskId":"t1","status":"completed","createdAt":"2026-11-29T07:21:21.240Z","lastUpdatedAt":"2026-11-29T07:21:22.242Z","ttl":null}`},
	{"Task/ttl zero is not null", &Task{
		TaskID: "t2", Status: StatusInputRequired, CreatedAt: "a", LastUpdatedAt: "b", TTL: protoI64(0),
	}, `{"taskId":"t2","status":"input_required","createdAt":"a","lastUpdatedAt":"b","ttl":0}`},
	{"CreateTaskResult", &CreateTaskResult{Task: Task{
		TaskID: "b75f", Status: StatusWorking, CreatedAt: "c", LastUpdatedAt: "c", TTL: protoI64(120000), PollInterval: protoI64(250),
	}}, `{"task":{"taskId":"b75f","status":"working","createdAt":"c","lastUpdatedAt":"c","ttl":120000,"pollInterval":250}}`},
	{"CreateTaskResult/immediate response", &CreateTaskResult{
		Task: Task{TaskID: "x", Status: StatusWorking, CreatedAt: "c", LastUpdatedAt: "c"},
		Meta: map[string]json.RawMessage{MetaModelImmediateResponse: json.RawMessage(`"Started; I'll report back."`)},
	}, `{"task":{"taskId":"x","status":"working","createdAt":"c","lastUpdatedAt":"c","ttl":null},"_meta":{"io.modelcontextprotocol/model-immediate-response":"Started; I'll report back."}}`},
	{"TaskMetadata/empty", &TaskMetadata{}, `{}`},
	{"TaskMetadata/ttl", &TaskMetadata{TTL: protoI64(60000)}, `{"ttl":60000}`},
	{"ListTasksResult", &ListTasksResult{
		Tasks:      []Task{{TaskID: "a", Status: StatusFailed, StatusMessage: "boom", CreatedAt: "c", LastUpdatedAt: "d", TTL: protoI64(1)}},
		NextCursor: "next-page-cursor",
	}, `{"tasks":[{"taskId":"a","status":"failed","statusMessage":"boom","createdAt":"c","lastUpdatedAt":"d","ttl":1}],"nextCursor":"next-page-cursor"}`},
	{"ListTasksResult/empty", &ListTasksResult{Tasks: []Task{}}, `{"tasks":[]}`},
	{"TaskIDParams", &TaskIDParams{TaskID: "abc"}, `{"taskId":"abc"}`},
	{"ListTasksParams/empty", &ListTasksParams{}, `{}`},
	{"ListTasksParams/cursor", &ListTasksParams{Cursor: "c1"}, `{"cursor":"c1"}`},
	{"RelatedTask", &RelatedTask{TaskID: "abc"}, `{"taskId":"abc"}`},
	{"Implementation", &Implementation{Name: "n", Version: "1.0.0"}, `{"name":"n","version":"1.0.0"}`},
	{"Implementation/title", &Implementation{Name: "n", Version: "1", Title: "N"}, `{"name":"n","version":"1","title":"N"}`},
	{"InitializeParams", &InitializeParams{
		ProtocolVersion: ProtocolVersion,
		Capabilities:    json.RawMessage(`{"elicitation":{},"tasks":{"requests":{"elicitation":{"create":{}}}}}`),
		ClientInfo:      Implementation{Name: "c", Version: "0.1"},
	}, `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"tasks":{"requests":{"elicitation":{"create":{}}}}},"clientInfo":{"name":"c","version":"0.1"}}`},
	{"InitializeResult", &InitializeResult{
		ProtocolVersion: ProtocolVersion,
		Capabilities:    json.RawMessage(`{"tools":{"listChanged":true}}`),
		ServerInfo:      Implementation{Name: "s", Version: "2"},
		Instructions:    "use it",
	}, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"2"},"instructions":"use it"}`},
	{"InitializeResult/no instructions", &InitializeResult{
		ProtocolVersion: "2025-06-18", Capabilities: json.RawMessage(`{}`), ServerInfo: Implementation{Name: "s", Version: "2"},
	}, `{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"2"}}`},
	{"ServerTasksCapability/full", &ServerTasksCapability{
		List: protoLeaf, Cancel: protoLeaf, Requests: &ServerTaskRequestsCapability{Tools: &ToolsTaskCapability{Call: protoLeaf}},
	}, `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`},
	{"ServerTasksCapability/empty", &ServerTasksCapability{}, `{}`},
	{"ClientTasksCapability/lifecycle example", &ClientTasksCapability{
		Requests: &ClientTaskRequestsCapability{
			Sampling:    &SamplingTaskCapability{CreateMessage: protoLeaf},
			Elicitation: &ElicitationTaskCapability{Create: protoLeaf},
		},
	}, `{"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}`},
	{"ClientTasksCapability/full", &ClientTasksCapability{List: protoLeaf, Cancel: protoLeaf}, `{"list":{},"cancel":{}}`},
	{"ToolExecution/optional", &ToolExecution{TaskSupport: TaskSupportOptional}, `{"taskSupport":"optional"}`},
	{"ToolExecution/absent", &ToolExecution{}, `{}`},
}

func TestWireRoundTrip(t *testing.T) {
	for _, tc := range wireCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Fatalf("encode:\n got %s\nwant %s", got, tc.json)
			}
			back := reflect.New(reflect.TypeOf(tc.v).Elem())
			if err := json.Unmarshal([]byte(tc.json), back.Interface()); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(back.Interface(), tc.v) {
				t.Fatalf("decode:\n got %#v\nwant %#v", back.Elem().Interface(), reflect.ValueOf(tc.v).Elem().Interface())
			}
		})
	}
}

// A nil task list must still be an array: "tasks" is required.
func TestListTasksResultNilIsEmptyArray(t *testing.T) {
	got, err := json.Marshal(ListTasksResult{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"tasks":[]}` {
		t.Fatalf("got %s", got)
	}
	got, _ = json.Marshal(&ListTasksResult{NextCursor: "x"})
	if string(got) != `{"tasks":[],"nextCursor":"x"}` {
		t.Fatalf("pointer: got %s", got)
	}
}

// Decoding what real peers send: the TS SDK v1 server orders fields differently and adds
// _meta; extra fields are ignored and ttl null decodes to nil.
func TestDecodeRealPeerTask(t *testing.T) {
	raw := `{"taskId":"a85bbb1560b348f134ba8df7e09dece6","status":"input_required","ttl":null,"createdAt":"2026-11-29T08:15:39.083Z","lastUpdatedAt":"2026-11-29T08:15:39.235Z","pollInterval":200,"statusMessage":"Delete a.txt?","_meta":{}}`
	var task Task
	if err := json.Unmarshal([]byte(raw), &task); err != nil {
		t.Fatal(err)
	}
	if task.TTL != nil || task.PollInterval == nil || *task.PollInterval != 200 || task.Status != StatusInputRequired || task.StatusMessage != "Delete a.txt?" {
		t.Fatalf("decoded %+v", task)
	}
}

// Capability leaves are objects: a boolean protoLeaf (rust-sdk #627) must not decode as "supported".
func TestCapabilityLeavesAreObjects(t *testing.T) {
	var c ServerTasksCapability
	if err := json.Unmarshal([]byte(`{"list":true}`), &c); err == nil {
		t.Fatalf("boolean protoLeaf accepted: %+v", c)
	}
	got, _ := json.Marshal(ServerTasksCapability{List: protoLeaf})
	if !bytes.Equal(got, []byte(`{"list":{}}`)) {
		t.Fatalf("got %s", got)
	}
}

func TestStatusTerminal(t *testing.T) {
	for s, want := range map[TaskStatus]bool{
		StatusWorking: false, StatusInputRequired: false,
		StatusCompleted: true, StatusFailed: true, StatusCancelled: true, "bogus": false,
	} {
		if s.Terminal() != want {
			t.Errorf("%q.Terminal() = %v", s, !want)
		}
	}
}

func TestSupportedVersionsNewestFirst(t *testing.T) {
	if SupportedVersions[0] != ProtocolVersion {
		t.Fatalf("first supported version %q, want %q", SupportedVersions[0], ProtocolVersion)
	}
	for i := 1; i < len(SupportedVersions); i++ {
		if SupportedVersions[i-1] <= SupportedVersions[i] {
			t.Fatalf("not newest first: %v", SupportedVersions)
		}
	}
}
