package sep2663

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func i64(n int64) *int64 { return &n }

// wireCase is one wire shape: value must encode to exactly json, and json must decode back
// to value (into a fresh value of the same type).
type wireCase struct {
	name  string
	value any
	json  string
}

func TestWireTypes(t *testing.T) {
	task := Task{
		TaskID: "786512e2", Status: StatusWorking, StatusMessage: "in progress",
		CreatedAt: "2025-11-25T10:30:00Z", LastUpdatedAt: "2025-11-25T10:40:00Z",
		TTLMs: i64(60000), PollIntervalMs: i64(5000),
	}
	taskJSON := `"taskId":"786512e2","status":"working","statusMessage":"in progress",` +
		`"createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:40:00Z","ttlMs":60000,"pollIntervalMs":5000`
	minimal := Task{TaskID: "t1", Status: StatusCancelled, CreatedAt: "a", LastUpdatedAt: "b"}
	minimalJSON := `"taskId":"t1","status":"cancelled","createdAt":"a","lastUpdatedAt":"b","ttlMs":null`
	elicit := InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"mode":"form","message":"Name?"}`)}
	elicitJSON := `{"method":"elicitation/create","params":{"mode":"form","message":"Name?"}}`

	cases := []wireCase{
		{"Implementation", &Implementation{Name: "n", Version: "1"}, `{"name":"n","version":"1"}`},
		{"Implementation/title", &Implementation{Name: "n", Version: "1", Title: "N"}, `{"name":"n","version":"1","title":"N"}`},
		{"ClientCapabilities/empty", &ClientCapabilities{}, `{}`},
		{"ClientCapabilities/full", &ClientCapabilities{
			Experimental: json.RawMessage(`{"x":{}}`), Roots: json.RawMessage(`{}`),
			Sampling:    json.RawMessage(`{"context":{},"tools":{}}`),
			Elicitation: &ElicitationCapability{Form: json.RawMessage(`{}`), URL: json.RawMessage(`{}`)},
			Extensions:  map[string]json.RawMessage{ExtensionTasks: json.RawMessage(`{}`)},
		}, `{"experimental":{"x":{}},"roots":{},"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"ServerCapabilities", &ServerCapabilities{
			Tools: json.RawMessage(`{"listChanged":true}`), Resources: json.RawMessage(`{}`),
			Extensions: map[string]json.RawMessage{ExtensionTasks: json.RawMessage(`{}`)},
		}, `{"resources":{},"tools":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"DiscoverResult", &DiscoverResult{
			ResultType: ResultComplete, SupportedVersions: []string{"2026-07-28"},
			Capabilities: ServerCapabilities{Tools: json.RawMessage(`{}`)},
			Instructions: "hi", TTLMs: 3600000, CacheScope: "public",
			Meta: map[string]json.RawMessage{MetaServerInfo: json.RawMessage(`{"name":"S","version":"1.0.0"}`)},
		}, `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"instructions":"hi","ttlMs":3600000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"S","version":"1.0.0"}}}`},
		{"DiscoverResult/ttl0", &DiscoverResult{ResultType: ResultComplete, SupportedVersions: []string{}, CacheScope: "private"},
			`{"resultType":"complete","supportedVersions":[],"capabilities":{},"ttlMs":0,"cacheScope":"private"}`},
		{"Task", &task, `{` + taskJSON + `}`},
		{"Task/ttlNull", &minimal, `{` + minimalJSON + `}`},
		{"DetailedTask/working", &DetailedTask{Task: task}, `{` + taskJSON + `}`},
		{"DetailedTask/input", &DetailedTask{Task: minimal, InputRequests: InputRequests{"name": elicit}},
			`{` + minimalJSON + `,"inputRequests":{"name":` + elicitJSON + `}}`},
		{"DetailedTask/completed", &DetailedTask{Task: minimal, Result: json.RawMessage(`{"content":[],"isError":true}`)},
			`{` + minimalJSON + `,"result":{"content":[],"isError":true}}`},
		{"DetailedTask/failed", &DetailedTask{Task: minimal, Error: &jsonrpc.Error{Code: -32603, Message: "rate limit", Data: json.RawMessage(`{"retry":true}`)}},
			`{` + minimalJSON + `,"error":{"code":-32603,"message":"rate limit","data":{"retry":true}}}`},
		{"CreateTaskResult", &CreateTaskResult{ResultType: ResultTask, Task: task},
			`{"resultType":"task",` + taskJSON + `}`},
		{"CreateTaskResult/meta", &CreateTaskResult{ResultType: ResultTask, Task: minimal,
			Meta: map[string]json.RawMessage{MetaServerInfo: json.RawMessage(`{"name":"s","version":"1"}`)}},
			`{"resultType":"task",` + minimalJSON + `,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`},
		{"GetTaskResult", &GetTaskResult{ResultType: ResultComplete, DetailedTask: DetailedTask{Task: minimal, Result: json.RawMessage(`{"content":[]}`)}},
			`{"resultType":"complete",` + minimalJSON + `,"result":{"content":[]}}`},
		{"InputRequest/noParams", &InputRequest{Method: "roots/list"}, `{"method":"roots/list"}`},
		{"InputRequests", &InputRequests{"a": elicit}, `{"a":` + elicitJSON + `}`},
		{"InputResponses", &InputResponses{"a": json.RawMessage(`{"action":"accept","content":{"name":"Luca"}}`)},
			`{"a":{"action":"accept","content":{"name":"Luca"}}}`},
		{"InputRequiredResult", &InputRequiredResult{ResultType: ResultInputRequired, InputRequests: InputRequests{"a": elicit}, RequestState: "opaque"},
			`{"resultType":"input_required","inputRequests":{"a":` + elicitJSON + `},"requestState":"opaque"}`},
		{"InputRequiredResult/stateOnly", &InputRequiredResult{ResultType: ResultInputRequired, RequestState: "s"},
			`{"resultType":"input_required","requestState":"s"}`},
		{"GetTaskParams", &GetTaskParams{TaskID: "t"}, `{"taskId":"t"}`},
		{"UpdateTaskParams", &UpdateTaskParams{TaskID: "t", InputResponses: InputResponses{"k": json.RawMessage(`{"roots":[]}`)}},
			`{"taskId":"t","inputResponses":{"k":{"roots":[]}}}`},
		{"CancelTaskParams", &CancelTaskParams{TaskID: "t"}, `{"taskId":"t"}`},
		{"TaskNotificationParams", &TaskNotificationParams{DetailedTask: DetailedTask{Task: minimal},
			Meta: map[string]json.RawMessage{MetaSubscriptionID: json.RawMessage(`"listen-7"`)}},
			`{` + minimalJSON + `,"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-7"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Fatalf("encode:\n got %s\nwant %s", got, tc.json)
			}
			back := reflect.New(reflect.TypeOf(tc.value).Elem()).Interface()
			if err := json.Unmarshal([]byte(tc.json), back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.value) {
				t.Fatalf("decode:\n got %#v\nwant %#v", back, tc.value)
			}
		})
	}
}

func TestTaskTTLNullDecodesToNil(t *testing.T) {
	var task Task
	if err := json.Unmarshal([]byte(`{"taskId":"x","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":null}`), &task); err != nil {
		t.Fatal(err)
	}
	if task.TTLMs != nil || task.PollIntervalMs != nil {
		t.Fatalf("ttlMs=%v pollIntervalMs=%v, want nil", task.TTLMs, task.PollIntervalMs)
	}
	b, _ := json.Marshal(task)
	if !bytes.Contains(b, []byte(`"ttlMs":null`)) {
		t.Fatalf("encoded %s lacks \"ttlMs\":null", b)
	}
}

func TestDiscoverServerInfo(t *testing.T) {
	var d DiscoverResult
	in := `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sep2663-server","version":"0.1.0"}}}`
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	info, ok := d.ServerInfo()
	if !ok || info != (Implementation{Name: "sep2663-server", Version: "0.1.0"}) {
		t.Fatalf("ServerInfo = %+v, %v", info, ok)
	}
	if !d.Capabilities.HasExtension(ExtensionTasks) || d.Capabilities.HasExtension("other") {
		t.Fatal("HasExtension wrong")
	}
	if _, ok := (&DiscoverResult{}).ServerInfo(); ok {
		t.Fatal("ServerInfo without _meta reported ok")
	}
	bad := DiscoverResult{Meta: map[string]json.RawMessage{MetaServerInfo: json.RawMessage(`"nope"`)}}
	if _, ok := bad.ServerInfo(); ok {
		t.Fatal("ServerInfo of a string reported ok")
	}
}

func TestStatusIsTerminal(t *testing.T) {
	for s, want := range map[TaskStatus]bool{
		StatusWorking: false, StatusInputRequired: false,
		StatusCompleted: true, StatusFailed: true, StatusCancelled: true,
	} {
		if s.IsTerminal() != want {
			t.Errorf("%s.IsTerminal() = %v", s, !want)
		}
	}
}
