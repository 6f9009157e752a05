#!/usr/bin/env node
// transports-client.mjs: the TS SDK v1 client (@modelcontextprotocol/sdk@1.32.2, MCP
// 2025-11-25 experimental Tasks) over the transports other than Streamable HTTP, for
// interop/transports_test.go. One run opens ONE connection and runs three flows on it:
//
//   basic   raw tools/call + task (slow_compute), tasks/get until terminal, tasks/result
//   elicit  callToolStream(confirm_delete): the elicitation arrives on the connection and is
//           accepted; the result says "Deleted"
//   cancel  create slow_compute{seconds:30}, tasks/cancel, tasks/get -> cancelled
//
//   node transports-client.mjs --stdio '["/path/taskbridge","stdio","--upstream","URL"]'
//   node transports-client.mjs --ws ws://127.0.0.1:PORT/mcp
//
// Prints exactly ONE JSON line: {transport, ok, failures[], flows:{basic,elicit,cancel},
// elicitations[], notifications[]}. Exit 0 whenever the flows ran; 1 on a crash (the line
// then carries "crash").
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import {
    CallToolResultSchema,
    CreateTaskResultSchema,
    ElicitRequestSchema,
    TaskStatusNotificationSchema,
    RELATED_TASK_META_KEY
} from '@modelcontextprotocol/sdk/types.js';

let transportName = '?';
function crash(e) {
    process.stdout.write(JSON.stringify({ transport: transportName, ok: false, crash: String(e?.stack ?? e) }) + '\n');
    process.exit(1);
}

const argv = process.argv.slice(2);
const opt = {};
for (let i = 0; i + 1 < argv.length; i += 2) opt[argv[i].replace(/^--/, '')] = argv[i + 1];
const timeout = Number(opt.timeout ?? 45000);
const reqOpts = { timeout };

let transport;
try {
    if (opt.stdio) {
        transportName = 'stdio';
        const [command, ...args] = JSON.parse(opt.stdio);
        transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
    } else if (opt.ws) {
        transportName = 'websocket';
        transport = new WebSocketClientTransport(new URL(opt.ws));
    } else throw new Error('give --stdio JSON_ARGV or --ws URL');
} catch (e) {
    crash(e);
}

const elicitations = [];
const notifications = [];
const client = new Client(
    { name: 'taskbridge-transports-client', version: '0.1.0' },
    { capabilities: { elicitation: { form: {} } } }
);
client.setRequestHandler(ElicitRequestSchema, async request => {
    elicitations.push({ params: request.params });
    return { action: 'accept', content: { confirm: true } };
});
client.setNotificationHandler(TaskStatusNotificationSchema, n => {
    notifications.push({ taskId: n.params.taskId, status: n.params.status });
});

try {
    await client.connect(transport);
} catch (e) {
    crash(e);
}

const failures = [];
const check = (cond, msg) => {
    if (!cond) failures.push(msg);
};
const sleep = ms => new Promise(r => setTimeout(r, ms));
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const errJSON = e => (e == null ? null : { code: e.code ?? null, message: String(e.message ?? e) });

async function createTask(name, args) {
    return client.request({ method: 'tools/call', params: { name, arguments: args, task: { ttl: 60000 } } }, CreateTaskResultSchema, reqOpts);
}

const flows = {
    async basic() {
        const created = await createTask('slow_compute', { seconds: 1, label: transportName });
        const taskId = created.task.taskId;
        const statuses = [];
        const deadline = Date.now() + timeout;
        let t;
        do {
            t = await client.experimental.tasks.getTask(taskId, reqOpts);
            statuses.push(t.status);
            if (!TERMINAL.has(t.status)) await sleep(Math.min(t.pollInterval ?? 200, 500));
        } while (!TERMINAL.has(t.status) && Date.now() < deadline);
        const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, reqOpts);
        const text = result.content?.find(c => c.type === 'text')?.text ?? '';
        check(created.task.status === 'working', `basic: created status ${created.task.status}`);
        check(t.status === 'completed', `basic: final status ${t.status}`);
        check(text.includes('Result: 42'), `basic: result text ${JSON.stringify(text)}`);
        check(result._meta?.[RELATED_TASK_META_KEY]?.taskId === taskId, 'basic: result lacks the related-task _meta');
        return { taskId, statuses, finalStatus: t.status, resultText: text };
    },

    async elicit() {
        const before = elicitations.length;
        const types = [];
        let result = null;
        let error = null;
        let taskId = null;
        const stream = client.experimental.tasks.callToolStream(
            { name: 'confirm_delete', arguments: { filename: 'a.txt' } },
            CallToolResultSchema,
            { task: { ttl: 60000 }, timeout }
        );
        for await (const m of stream) {
            types.push(m.type);
            if (m.type === 'taskCreated') taskId = m.task.taskId;
            if (m.type === 'result') result = m.result;
            if (m.type === 'error') error = errJSON(m.error);
        }
        const mine = elicitations.slice(before);
        const text = result?.content?.find(c => c.type === 'text')?.text ?? '';
        check(mine.length === 1, `elicit: ${mine.length} elicitations, want 1`);
        check(mine[0]?.params?._meta?.[RELATED_TASK_META_KEY]?.taskId === taskId, 'elicit: elicitation lacks the related-task _meta');
        check(text.startsWith('Deleted'), `elicit: result text ${JSON.stringify(text)} (error ${JSON.stringify(error)})`);
        return { taskId, types, resultText: text, error, elicitations: mine.length };
    },

    async cancel() {
        const created = await createTask('slow_compute', { seconds: 30 });
        const taskId = created.task.taskId;
        await sleep(200);
        const c = await client.experimental.tasks.cancelTask(taskId, reqOpts);
        const after = await client.experimental.tasks.getTask(taskId, reqOpts);
        check(c.status === 'cancelled', `cancel: cancel result status ${c.status}`);
        check(after.status === 'cancelled', `cancel: tasks/get after cancel ${after.status}`);
        return { taskId, cancelStatus: c.status, afterStatus: after.status };
    }
};

const out = {};
for (const [name, fn] of Object.entries(flows)) {
    try {
        out[name] = await fn();
    } catch (e) {
        failures.push(`${name}: threw ${e?.message ?? e}`);
        out[name] = { unexpectedError: errJSON(e) };
    }
}
await sleep(300); // let trailing status notifications arrive
try {
    await client.close();
} catch {}
process.stdout.write(JSON.stringify({ transport: transportName, ok: failures.length === 0, failures, flows: out, elicitations, notifications }) + '\n');
process.exit(0);
