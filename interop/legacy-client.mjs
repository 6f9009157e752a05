#!/usr/bin/env node
// legacy-client.mjs: a real MCP 2025-11-25 experimental-Tasks *client* (TypeScript SDK v1,
// @modelcontextprotocol/sdk@1.32.2, StreamableHTTPClientTransport) that runs ONE named flow
// per invocation and prints exactly ONE JSON line on stdout with its observations.
//
//   node legacy-client.mjs --url URL --flow NAME [--tool T] [--args JSON]
//        [--timeout MS] [--ttl MS] [--elicit-action accept|decline|cancel] [--bearer TOKEN]
//   node legacy-client.mjs --url URL --list-tools        (same as --flow tools)
//
// Flows: tools, stream, poll, list, cancel, tool-error, protocol-error, unknown, sync, elicit,
// changes (needs an upstream with add_tool and bump_resource: the Go fixture's ListChanged).
// Exit code 0 whenever the flow ran (even if `ok` is false); non-zero only on a crash
// (bad CLI, cannot connect, ...), in which case the JSON line carries `crash`.
// See README.md for the exact output shape of each flow.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CallToolResultSchema,
    CreateTaskResultSchema,
    ElicitRequestSchema,
    ResourceUpdatedNotificationSchema,
    ToolListChangedNotificationSchema,
    TaskStatusNotificationSchema,
    McpError,
    RELATED_TASK_META_KEY
} from '@modelcontextprotocol/sdk/types.js';

// ---------------------------------------------------------------- CLI
function parseArgs(argv) {
    const o = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--list-tools') o.flow = 'tools';
        else if (a.startsWith('--')) {
            const k = a.slice(2);
            if (i + 1 >= argv.length) throw new Error(`missing value for ${a}`);
            o[k] = argv[++i];
        } else throw new Error(`unexpected argument ${a}`);
    }
    return o;
}

const DEFAULTS = {
    tools: { tool: null, args: {} },
    stream: { tool: 'long_job', args: { seconds: 1 } },
    poll: { tool: 'long_job', args: { seconds: 1 } },
    list: { tool: 'slow_compute', args: { seconds: 1 } },
    cancel: { tool: 'slow_compute', args: { seconds: 30 } },
    'tool-error': { tool: 'failing_job', args: { seconds: 1 } },
    'protocol-error': { tool: 'protocol_error_job', args: { seconds: 1 } },
    unknown: { tool: null, args: {} },
    sync: { tool: 'greet', args: { name: 'World' } },
    elicit: { tool: 'confirm_delete', args: { filename: 'a.txt' } },
    changes: { tool: null, args: {} }
};

let opts;
let flow = '?';
try {
    opts = parseArgs(process.argv.slice(2));
    flow = opts.flow ?? '?';
    if (!opts.url) throw new Error('--url is required');
    if (!DEFAULTS[flow]) throw new Error(`unknown --flow ${JSON.stringify(opts.flow)}; one of ${Object.keys(DEFAULTS).join(', ')}`);
} catch (e) {
    crash(e);
}
const tool = opts.tool ?? DEFAULTS[flow].tool;
const args = opts.args !== undefined ? JSON.parse(opts.args) : DEFAULTS[flow].args;
const timeout = Number(opts.timeout ?? 60000);
const ttl = Number(opts.ttl ?? 60000);
const elicitAction = opts['elicit-action'] ?? 'accept';

// ---------------------------------------------------------------- helpers
// {code, message, data?}. `message` is the JSON-RPC error message as it came off the wire: the
// SDK's McpError prepends "MCP error <code>: " client-side, and exactly one such prefix is removed.
function errJSON(e) {
    if (e == null) return null;
    const code = typeof e.code === 'number' ? e.code : null;
    let message = String(e.message ?? e);
    if (e instanceof McpError && message.startsWith(`MCP error ${code}: `)) message = message.slice(`MCP error ${code}: `.length);
    const o = { code, message };
    if (e.data !== undefined) o.data = e.data;
    return o;
}

function crash(e) {
    // fetch failures carry the reason (a refused connection, an untrusted certificate) in cause.
    const cause = e?.cause ? `\ncause: ${String(e.cause?.stack ?? e.cause)}` : '';
    process.stdout.write(JSON.stringify({ flow, ok: false, crash: String(e?.stack ?? e) + cause }) + '\n');
    process.exit(1);
}

const sleep = ms => new Promise(r => setTimeout(r, ms));
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const relatedOf = obj => obj?._meta?.[RELATED_TASK_META_KEY] ?? null;

// ---------------------------------------------------------------- client
const elicitations = [];
const notifications = [];

const client = new Client(
    { name: 'taskbridge-legacy-client', version: '0.1.0' },
    { capabilities: { elicitation: { form: {} } } }
);

client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    elicitations.push({ requestId: extra.requestId ?? null, params: request.params });
    if (elicitAction === 'accept') return { action: 'accept', content: { confirm: true } };
    return { action: elicitAction };
});
const changes = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, n => changes.push({ method: n.method, params: n.params ?? null }));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => changes.push({ method: n.method, params: n.params ?? null }));
client.setNotificationHandler(TaskStatusNotificationSchema, n => {
    notifications.push({ method: n.method, taskId: n.params.taskId, status: n.params.status });
});

// --bearer TOKEN sends Authorization: Bearer TOKEN on every request (an edge proxy or the
// bridge's auth checks it). HTTPS with a private CA: run with NODE_EXTRA_CA_CERTS=ca.pem.
const transport = new StreamableHTTPClientTransport(new URL(opts.url),
    opts.bearer ? { requestInit: { headers: { Authorization: `Bearer ${opts.bearer}` } } } : undefined);
try {
    await client.connect(transport);
} catch (e) {
    crash(e);
}

const reqOpts = { timeout };

// Create a task with a raw task-augmented tools/call (no reliance on the tools/list cache).
async function createTask(name = tool, a = args) {
    const r = await client.request(
        { method: 'tools/call', params: { name, arguments: a, task: { ttl } } },
        CreateTaskResultSchema,
        reqOpts
    );
    return r;
}

// Poll tasks/get until terminal. On input_required, starts ONE tasks/result (which carries the
// queued elicitation) and keeps polling. Returns {polls, final, earlyResult}.
async function pollUntilTerminal(taskId) {
    const polls = [];
    const deadline = Date.now() + timeout;
    let earlyResult = null;
    let final = null;
    while (Date.now() < deadline) {
        const t = await client.experimental.tasks.getTask(taskId, reqOpts);
        polls.push({ status: t.status, statusMessage: t.statusMessage ?? null });
        if (TERMINAL.has(t.status)) {
            final = t;
            break;
        }
        if (t.status === 'input_required' && !earlyResult) {
            earlyResult = client.experimental.tasks
                .getTaskResult(taskId, CallToolResultSchema, reqOpts)
                .then(result => ({ result, error: null }), error => ({ result: null, error: errJSON(error) }));
        }
        await sleep(Math.min(Math.max(t.pollInterval ?? 200, 50), 1000));
    }
    return { polls, final, earlyResult };
}

async function taskResult(taskId, t = timeout) {
    try {
        const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: t });
        return { result, error: null };
    } catch (e) {
        return { result: null, error: errJSON(e) };
    }
}

async function expectError(fn) {
    try {
        const r = await fn();
        return { error: null, result: r };
    } catch (e) {
        return { error: errJSON(e), result: null };
    }
}

async function runStream(name, a) {
    const messages = [];
    let taskId = null;
    const stream = client.experimental.tasks.callToolStream({ name, arguments: a }, CallToolResultSchema, {
        task: { ttl },
        timeout
    });
    for await (const m of stream) {
        if (m.type === 'taskCreated') {
            taskId = m.task.taskId;
            messages.push({ type: m.type, task: m.task });
        } else if (m.type === 'taskStatus') messages.push({ type: m.type, task: m.task });
        else if (m.type === 'result') messages.push({ type: m.type, result: m.result });
        else if (m.type === 'error') messages.push({ type: m.type, error: errJSON(m.error) });
        else messages.push({ type: m.type });
    }
    const last = messages[messages.length - 1] ?? {};
    return {
        taskId,
        types: messages.map(m => m.type),
        statuses: messages.filter(m => m.type === 'taskStatus').map(m => m.task.status),
        messages,
        result: last.type === 'result' ? last.result : null,
        error: last.type === 'error' ? last.error : null
    };
}

const failures = [];
const check = (cond, msg) => {
    if (!cond) failures.push(msg);
};
const TASK_KEYS = ['taskId', 'status', 'createdAt', 'lastUpdatedAt', 'ttl'];
function checkTaskShape(t, where) {
    for (const k of TASK_KEYS) check(t && k in t, `${where}: Task lacks required key ${k}`);
}

// ---------------------------------------------------------------- flows
const flows = {
    async tools() {
        const r = await client.listTools(undefined, reqOpts);
        const taskSupport = {};
        for (const t of r.tools) taskSupport[t.name] = t.execution?.taskSupport ?? null;
        check(r.tools.length > 0, 'tools/list is empty');
        return { tools: r.tools, taskSupport };
    },

    async stream() {
        const s = await runStream(tool, args);
        check(s.types[0] === 'taskCreated', `first message is ${s.types[0]}, want taskCreated`);
        check(s.types[s.types.length - 1] === 'result', `last message is ${s.types[s.types.length - 1]}, want result`);
        check(s.result && Array.isArray(s.result.content), 'no CallToolResult');
        const rel = relatedOf(s.result);
        check(rel?.taskId === s.taskId, 'result lacks matching related-task _meta');
        return { ...s, relatedTask: rel };
    },

    async poll() {
        const created = await createTask();
        const task = created.task;
        checkTaskShape(task, 'CreateTaskResult.task');
        check(task.status === 'working', `created status ${task.status}, want working`);
        const { polls, final, earlyResult } = await pollUntilTerminal(task.taskId);
        if (final) checkTaskShape(final, 'tasks/get');
        check(final?.status === 'completed', `final status ${final?.status}, want completed`);
        const r = earlyResult ? await earlyResult : await taskResult(task.taskId);
        const rel = relatedOf(r.result);
        check(r.result && !r.error, `tasks/result failed: ${JSON.stringify(r.error)}`);
        check(rel?.taskId === task.taskId, 'tasks/result lacks matching related-task _meta');
        return {
            taskId: task.taskId,
            created,
            statuses: polls.map(p => p.status),
            polls,
            finalStatus: final?.status ?? null,
            finalTask: final,
            result: r.result,
            resultError: r.error,
            relatedTask: rel,
            usedEarlyResult: !!earlyResult
        };
    },

    async list() {
        const a = (await createTask()).task.taskId;
        const b = (await createTask()).task.taskId;
        const listedIds = [];
        const tasks = [];
        let cursor;
        let pages = 0;
        do {
            const r = await client.experimental.tasks.listTasks(cursor, reqOpts);
            pages++;
            for (const t of r.tasks) {
                listedIds.push(t.taskId);
                tasks.push(t);
            }
            cursor = r.nextCursor;
        } while (cursor && pages < 100);
        const includesBoth = listedIds.includes(a) && listedIds.includes(b);
        check(includesBoth, 'tasks/list lacks a created task');
        for (const t of tasks) checkTaskShape(t, 'tasks/list entry');
        return { createdIds: [a, b], listedIds, pages, includesBoth, tasks };
    },

    async cancel() {
        const created = await createTask();
        const taskId = created.task.taskId;
        // A tasks/result that is already blocked when the cancel arrives (unspecified, spec #1956).
        const blocked = taskResult(taskId, 15000);
        await sleep(300);
        const c = await expectError(() => client.experimental.tasks.cancelTask(taskId, reqOpts));
        const cancelStatus = c.result?.status ?? null;
        const after = await client.experimental.tasks.getTask(taskId, reqOpts);
        const again = await expectError(() => client.experimental.tasks.cancelTask(taskId, reqOpts));
        // Unspecified by 2025-11-25 (spec issue #1956): record what tasks/result says for a cancelled task.
        const res = await taskResult(taskId, 10000);
        const blk = await blocked;
        check(!c.error, `tasks/cancel failed: ${JSON.stringify(c.error)}`);
        check(cancelStatus === 'cancelled', `cancel result status ${cancelStatus}, want cancelled`);
        check(after.status === 'cancelled', `tasks/get after cancel: ${after.status}, want cancelled`);
        check(again.error?.code === -32602, `second cancel code ${again.error?.code}, want -32602`);
        return {
            taskId,
            cancelResult: c.result,
            cancelError: c.error,
            cancelStatus,
            afterStatus: after.status,
            afterTask: after,
            secondCancelError: again.error,
            secondCancelResult: again.result,
            resultAfterCancel: res.result,
            resultAfterCancelError: res.error,
            blockedResult: blk.result,
            blockedResultError: blk.error
        };
    },

    async 'tool-error'() {
        // Real-client path first: callToolStream (TS v1 never calls tasks/result on failed,
        // quirk 2, so it ends with a synthetic error) ...
        const s = await runStream(tool, args);
        const final = s.taskId ? await client.experimental.tasks.getTask(s.taskId, reqOpts) : null;
        // ... then tasks/result directly to get the real payload.
        const r = s.taskId ? await taskResult(s.taskId) : { result: null, error: null };
        check(final?.status === 'failed', `final status ${final?.status}, want failed`);
        check(r.result?.isError === true, 'tasks/result payload is not a CallToolResult with isError:true');
        const rel = relatedOf(r.result);
        check(rel?.taskId === s.taskId, 'tasks/result lacks matching related-task _meta');
        return {
            taskId: s.taskId,
            streamTypes: s.types,
            streamError: s.error,
            statuses: s.statuses,
            finalStatus: final?.status ?? null,
            statusMessage: final?.statusMessage ?? null,
            result: r.result,
            resultError: r.error,
            relatedTask: rel
        };
    },

    async 'protocol-error'() {
        const created = await createTask();
        const taskId = created.task.taskId;
        const { polls, final } = await pollUntilTerminal(taskId);
        const r = await taskResult(taskId);
        check(final?.status === 'failed', `final status ${final?.status}, want failed`);
        check(r.error && typeof r.error.code === 'number', 'tasks/result did not return a JSON-RPC error');
        return {
            taskId,
            statuses: polls.map(p => p.status),
            finalStatus: final?.status ?? null,
            statusMessage: final?.statusMessage ?? null,
            resultError: r.error,
            result: r.result
        };
    },

    async unknown() {
        const id = 'no-such-task';
        const g = await expectError(() => client.experimental.tasks.getTask(id, reqOpts));
        const r = await expectError(() => client.experimental.tasks.getTaskResult(id, CallToolResultSchema, reqOpts));
        const c = await expectError(() => client.experimental.tasks.cancelTask(id, reqOpts));
        check(g.error?.code === -32602, `tasks/get code ${g.error?.code}, want -32602`);
        check(r.error?.code === -32602, `tasks/result code ${r.error?.code}, want -32602`);
        check(c.error?.code === -32602, `tasks/cancel code ${c.error?.code}, want -32602`);
        return { getTaskError: g.error, getTaskResultError: r.error, cancelTaskError: c.error };
    },

    async sync() {
        // NO tools/list before this call: TS v1 callTool() throws client-side when the cached
        // tools/list marks the tool `required` (quirk 3). With an empty cache the request goes
        // on the wire as a plain (non-task) tools/call, which is what we want to observe.
        const r = await expectError(() => client.callTool({ name: tool, arguments: args }, CallToolResultSchema, reqOpts));
        check(r.result && !r.result.isError, `sync call did not return a successful result: ${JSON.stringify(r.error ?? r.result)}`);
        return { result: r.result, error: r.error, isError: r.result?.isError === true };
    },

    // The SDK opens the session's GET stream itself after initialized; the bridge opens its
    // upstream listen asynchronously, so a change made before it is open is not seen: the
    // flow repeats the change (a new tool each time) until a notification arrives.
    async changes() {
        const capabilities = client.getServerCapabilities() ?? {};
        const uri = 'fixture://counter';
        await client.subscribeResource({ uri }, reqOpts);
        const waitFor = async (method, ms) => {
            const end = Date.now() + ms;
            while (Date.now() < end) {
                const n = changes.find(c => c.method === method);
                if (n) return n;
                await sleep(25);
            }
            return null;
        };
        let attempts = 0;
        let listChanged = null;
        while (!listChanged && attempts < 20) {
            attempts++;
            await client.callTool({ name: 'add_tool', arguments: { name: `added_${attempts}` } }, CallToolResultSchema, reqOpts);
            listChanged = await waitFor('notifications/tools/list_changed', 500);
        }
        await client.callTool({ name: 'bump_resource', arguments: {} }, CallToolResultSchema, reqOpts);
        const updated = await waitFor('notifications/resources/updated', 5000);
        const tools = (await client.listTools(undefined, reqOpts)).tools.map(t => t.name);
        check(capabilities.tools?.listChanged === true, 'initialize does not advertise tools.listChanged');
        check(capabilities.resources?.subscribe === true, 'initialize does not advertise resources.subscribe');
        check(listChanged !== null, `no notifications/tools/list_changed after ${attempts} add_tool calls`);
        check(updated?.params?.uri === uri, `no notifications/resources/updated for ${uri}`);
        check(tools.includes('added_1'), 'tools/list lacks the added tool');
        return { capabilities, attempts, listChanged, updated, changes, tools };
    },

    async elicit() {
        const s = await runStream(tool, args);
        const rel = relatedOf(s.result);
        const text = s.result?.content?.find(c => c.type === 'text')?.text ?? null;
        check(elicitations.length === 1, `saw ${elicitations.length} elicitation requests, want 1`);
        const erel = elicitations[0]?.params?._meta?.[RELATED_TASK_META_KEY] ?? null;
        check(erel?.taskId === s.taskId, 'elicitation/create lacks matching related-task _meta');
        check(s.statuses.includes('input_required'), 'never saw input_required');
        check(s.result != null, `no result: ${JSON.stringify(s.error)}`);
        check(rel?.taskId === s.taskId, 'result lacks matching related-task _meta');
        const final = s.taskId ? await client.experimental.tasks.getTask(s.taskId, reqOpts) : null;
        return {
            ...s,
            resultText: text,
            relatedTask: rel,
            elicitationRelatedTask: erel,
            finalStatus: final?.status ?? null
        };
    }
};

// ---------------------------------------------------------------- run
let out;
try {
    const details = await flows[flow]();
    out = {
        flow,
        ok: failures.length === 0,
        failures,
        tool,
        args,
        protocolVersion: transport.protocolVersion ?? null,
        ...details,
        elicitations,
        notifications
    };
} catch (e) {
    // An unexpected protocol error inside a flow: report it, but it is not a crash.
    out = {
        flow,
        ok: false,
        failures: [...failures, `unexpected error: ${e?.message ?? e}`],
        tool,
        args,
        protocolVersion: transport.protocolVersion ?? null,
        unexpectedError: errJSON(e),
        elicitations,
        notifications
    };
}
process.stdout.write(JSON.stringify(out) + '\n');
try {
    await Promise.race([transport.terminateSession().catch(() => {}), sleep(1000)]);
    await Promise.race([client.close(), sleep(1000)]);
} catch {
    /* ignore */
}
process.exit(0);
