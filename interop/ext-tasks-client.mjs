#!/usr/bin/env node
// ext-tasks-client.mjs: the official SEP-2663 requester (@modelcontextprotocol/ext-tasks 0.2.2
// on @modelcontextprotocol/client 2.4.0, pinned to MCP 2026-07-28) runs one tool call as a
// task against URL and prints exactly one JSON line on stdout (see README.md).
//
//   node ext-tasks-client.mjs --url URL [--tool T] [--args JSON] [--answer JSON]
//                             [--cancel] [--timeout MS] [--caps JSON]
//
// --caps replaces the client capabilities it declares (default {"elicitation":{"form":{}}}):
// a server must not ask for input the client did not declare, so a tool that asks for
// sampling or roots needs them declared.
//
// Exit 0 whenever the flow ran (even with "ok":false); exit 1 on a crash, with
// {"ok":false,"crash":"…"}.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const has = (name) => process.argv.includes(name);

const url = arg("--url");
const tool = arg("--tool", "simulate-research-query");
const args = JSON.parse(arg("--args", JSON.stringify({ topic: "python", ambiguous: true })));
const answer = JSON.parse(arg("--answer", JSON.stringify({ interpretation: "programming" })));
const timeoutMs = Number(arg("--timeout", "60000"));
const doCancel = has("--cancel");
const caps = JSON.parse(arg("--caps", JSON.stringify({ elicitation: { form: {} } })));
// The answer to sampling/createMessage (mcp-go's ask_client asks for one).
const SAMPLING_ANSWER = "pong from ext-tasks-client";

const out = {
  flow: doCancel ? "cancel" : "settle",
  ok: false,
  failures: [],
  tool,
  args,
  protocolEra: null,
  tasksExtension: false,
  wire: [], // [{method, resultType, status, error}] of every raw-dispatched request
  taskId: null,
  kind: null,
  statuses: [],
  inputRequests: [], // [{kind, message, delivery, inputId}]
  outcome: null,
  resultText: null,
};

function emit(code) {
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(code);
}

const client = new Client(
  { name: "taskbridge-ext-tasks-client", version: "0.1.0" },
  {
    capabilities: caps,
    versionNegotiation: { mode: { pin: PROTOCOL } },
  },
);

// rawDispatch: SDK Client 2.x has no public raw request path, so task wire shapes
// (tools/call, tasks/*) are POSTed here with the 2026-07-28 headers. ext-tasks has already
// framed params._meta (protocol version, client info, client capabilities).
let nextId = 1;
async function rawDispatch(request, options = {}) {
  const params = request.params ?? {};
  // Host context headers first (lower-cased), then the headers this request's own method
  // and name dictate: the 2026-07-28 Mcp-* headers always describe this very request.
  const headers = {};
  for (const [k, v] of Object.entries(options.context?.headers ?? {})) headers[k.toLowerCase()] = v;
  Object.assign(headers, {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL,
    "mcp-method": request.method,
  });
  delete headers["mcp-name"];
  const name = request.method === "tools/call" ? params.name : request.method.startsWith("tasks/") ? params.taskId : undefined;
  if (typeof name === "string") headers["mcp-name"] = name;
  const body = JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: request.method, params });
  const res = await fetch(url, { method: "POST", headers, body, signal: options.signal });
  const text = await res.text();
  let msg;
  if ((res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const data = text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
    msg = data.map((d) => JSON.parse(d)).find((m) => "result" in m || "error" in m);
  } else {
    msg = JSON.parse(text);
  }
  const rec = { method: request.method, http: res.status };
  if (msg.error) {
    rec.error = msg.error.code;
    out.wire.push(rec);
    return { kind: "error", error: msg.error };
  }
  rec.resultType = msg.result?.resultType;
  if (msg.result?.status) rec.status = msg.result.status;
  out.wire.push(rec);
  return { kind: "result", result: msg.result };
}

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.protocolEra = client.getProtocolEra();
  out.tasksExtension = client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/tasks"] !== undefined;

  const session = createTaskSessionFromClient(client, {
    endpointId: "taskbridge-interop",
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: PROTOCOL,
      clientInfo: { name: "taskbridge-ext-tasks-client", version: "0.1.0" },
      clientCapabilities: caps,
    },
    onInputRequest: async (request, context) => {
      out.inputRequests.push({
        kind: request.kind,
        message: request.params?.message ?? null,
        delivery: context.delivery,
        inputId: context.inputId ?? null,
        taskId: context.taskId ?? null,
      });
      if (request.kind === "elicitation") return { action: "accept", content: answer };
      if (request.kind === "roots") return { roots: [] };
      if (request.kind === "sampling") {
        return { role: "assistant", model: "interop", content: { type: "text", text: SAMPLING_ANSWER } };
      }
      throw new Error(`unexpected input request ${request.kind}`);
    },
  });
  const timer = setTimeout(() => {
    out.failures.push(`timed out after ${timeoutMs} ms`);
    emit(0);
  }, timeoutMs);

  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  out.kind = execution.kind;
  out.taskId = execution.handle?.taskId ?? null;
  if (doCancel) {
    // Wait until the task runs, then cancel it and read the outcome.
    await new Promise((r) => setTimeout(r, 300));
    await execution.cancel();
  }
  const { outcome } = await execution.settle({
    onEvent: (ev) => {
      if (ev.type === "task") out.statuses.push(ev.task.status);
    },
  });
  clearTimeout(timer);
  out.outcome = { status: outcome.status };
  if (outcome.status === "completed") {
    out.outcome.result = outcome.result;
    out.resultText = outcome.result?.content?.find((c) => c.type === "text")?.text ?? null;
  } else if (outcome.status === "failed") {
    out.outcome.error = { message: outcome.error?.message, code: outcome.error?.code };
  }
  await session.close().catch(() => {});
  await client.close().catch(() => {});

  if (out.protocolEra !== "modern") out.failures.push(`protocol era ${out.protocolEra}, want modern`);
  if (out.kind !== "task") out.failures.push(`execution kind ${out.kind}, want task`);
  const want = doCancel ? "cancelled" : "completed";
  if (outcome.status !== want) out.failures.push(`outcome ${outcome.status}, want ${want}`);
  out.ok = out.failures.length === 0;
  emit(0);
} catch (e) {
  out.crash = (e?.stack ?? String(e)) + (e?.cause ? "\ncause: " + (e.cause.stack ?? String(e.cause)) : "");
  emit(1);
}
