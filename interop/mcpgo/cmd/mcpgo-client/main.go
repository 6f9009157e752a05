// Command mcpgo-client is a github.com/mark3labs/mcp-go v1.2.1 MCP 2025-11-25 task client for
// taskbridge's interop tests: it runs one flow and prints one JSON line of observations.
//
//	mcpgo-client -url http://HOST:PORT/mcp -flow NAME [-tool T] [-args JSON] [-timeout 60s] [-ttl 60000]
//	mcpgo-client -stdio "CMD ARGS…" -flow NAME …     (or -stdio '["CMD","ARG",…]')
//
// The client pins protocol version 2025-11-25 (WithProtocolVersion; -version "" leaves mcp-go's
// default, which tries server/discover first and goes 2026-07-28 when it is answered), and
// declares sampling, roots and elicitation. Over HTTP it opens the
// standalone GET stream (WithContinuousListening) and records on which stream (GET or the
// POST of which method) each server→client request arrived.
//
// Flows: tools, sync, create_poll_result, list, cancel, tool_error, protocol_error,
// unknown_id, ask_client, ask_client_sync, elicit, typed_task_call (see interop/README.md for the keys of each).
// mcp-go's typed CallTool cannot read a CreateTaskResult ("content is missing"), so every
// task-augmented tools/call goes through the transport layer; tasks/get, tasks/result,
// tasks/list and tasks/cancel use the typed client methods.
//
// Exit 0 when the flow ran (whatever it observed), 1 on a crash (bad flags, no connection),
// and then the line has a "crash" key.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// options are the command-line flags.
type options struct {
	url, stdio, flow, tool, args string
	version                      string
	timeout                      time.Duration
	ttl                          int64
}

func main() {
	o := &options{}
	flag.StringVar(&o.url, "url", "", "streamable HTTP endpoint")
	flag.StringVar(&o.stdio, "stdio", "", `server command to launch over stdio ("CMD ARGS" or a JSON array)`)
	flag.StringVar(&o.flow, "flow", "", "flow to run")
	flag.StringVar(&o.tool, "tool", "", "tool to call instead of the flow's default")
	flag.StringVar(&o.args, "args", "", "tool arguments (JSON object) instead of the flow's default")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "limit for the whole flow")
	flag.Int64Var(&o.ttl, "ttl", 60000, "params.task.ttl of task-augmented calls (ms)")
	flag.StringVar(&o.version, "version", mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		`protocol version to pin (WithProtocolVersion); "" leaves mcp-go's default: server/discover first`)
	flag.Parse()
	out := map[string]any{"flow": o.flow}
	if err := run(o, out); err != nil {
		out["crash"] = err.Error()
		emit(out)
		os.Exit(1)
	}
	emit(out)
}

func emit(out map[string]any) {
	b, err := json.Marshal(out)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"crash":%q}`, err.Error()))
	}
	fmt.Println(string(b))
}

func run(o *options, out map[string]any) error {
	f, ok := flows[o.flow]
	if !ok {
		return fmt.Errorf("-flow %q: unknown flow", o.flow)
	}
	if (o.url == "") == (o.stdio == "") {
		return errors.New("give exactly one of -url and -stdio")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	s, err := connect(ctx, o)
	if err != nil {
		return err
	}
	defer s.c.Close()
	out["transport"] = s.transport
	out["protocolVersion"] = s.protocolVersion
	out["serverInfo"] = s.serverInfo
	out["serverTasks"] = s.tasksCapability
	f(ctx, s, o, out)
	out["serverRequests"] = s.h.log()
	out["notifications"] = s.notes.list()
	if s.rec != nil {
		out["wire"] = s.rec.requests()
	}
	return nil
}

// session is one connected, initialized client.
type session struct {
	c               *client.Client
	rec             *recorder // nil over stdio
	h               *handlers
	notes           *notifications
	transport       string
	protocolVersion string
	serverInfo      mcp.Implementation
	tasksCapability any
	nextID          int64
}

func connect(ctx context.Context, o *options) (*session, error) {
	s := &session{h: &handlers{}, notes: &notifications{}, nextID: 1 << 40}
	var tr transport.Interface
	if o.url != "" {
		s.rec = &recorder{next: http.DefaultTransport}
		h, err := transport.NewStreamableHTTP(o.url, transport.WithContinuousListening(),
			transport.WithHTTPBasicClient(&http.Client{Transport: s.rec}))
		if err != nil {
			return nil, err
		}
		tr, s.transport = h, "http"
	} else {
		argv, err := splitCommand(o.stdio)
		if err != nil {
			return nil, err
		}
		tr, s.transport = transport.NewStdio(argv[0], nil, argv[1:]...), "stdio"
	}
	copts := []client.ClientOption{client.WithSamplingHandler(s.h), client.WithRootsHandler(s.h), client.WithElicitationHandler(s.h)}
	if o.version != "" {
		copts = append(copts, client.WithProtocolVersion(o.version))
	}
	s.c = client.NewClient(tr, copts...)
	if err := s.c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	s.c.OnNotification(s.notes.add)
	res, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "mcpgo-client", Version: "1.2.1"}}})
	if err != nil {
		s.c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	s.protocolVersion, s.serverInfo = res.ProtocolVersion, res.ServerInfo
	if res.Capabilities.Tasks != nil {
		s.tasksCapability = res.Capabilities.Tasks
	}
	return s, nil
}

// splitCommand reads -stdio: a JSON array of argv, or words separated by spaces.
func splitCommand(s string) ([]string, error) {
	var argv []string
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		if err := json.Unmarshal([]byte(s), &argv); err != nil {
			return nil, fmt.Errorf("-stdio: %w", err)
		}
	} else {
		argv = strings.Fields(s)
	}
	if len(argv) == 0 {
		return nil, errors.New("-stdio: empty command")
	}
	return argv, nil
}
