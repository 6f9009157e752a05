// legacy-fixture.mjs: the tools, task store and McpServer factory of the 2025-11-25 task
// server fixtures built on the TypeScript SDK v1, shared by legacy-server.mjs (Streamable
// HTTP) and legacy-stdio-server.mjs (stdio). See interop/README.md for the tools.

import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import {
    CreateMessageResultSchema,
    ElicitResultSchema,
    McpError,
    ErrorCode,
    SubscribeRequestSchema,
    UnsubscribeRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import { registerConformance } from './conformance-fixture.mjs';

const POLL_INTERVAL = 200;
const DEFAULT_TTL = 300000;

export function argValue(name, dflt) {
    const i = process.argv.indexOf(name);
    return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
export const log = (...a) => console.error(`[${process.env.LEGACY_FIXTURE_NAME ?? 'legacy-server'}]`, ...a);

// ---------------------------------------------------------------------------
// Task store: the SDK's InMemoryTaskStore plus two fixture hooks.
//  - statusMessage for terminal results (storeTaskResult cannot set one itself), so a
//    `failed` task carries its diagnostics in tasks/get (TS v1 clients never call
//    tasks/result on failed, quirk 2).
//  - a JSON-RPC error as the task's outcome: getTaskResult throws the stored McpError, and
//    the SDK's tasks/result handler turns that into the same JSON-RPC error response, which
//    is what the 2025-11-25 spec asks for (the stock store can only hold results).
// ---------------------------------------------------------------------------
class FixtureTaskStore extends InMemoryTaskStore {
    constructor() {
        super();
        this.pendingStatusMessage = new Map();
        this.errors = new Map();
    }
    async storeTaskResult(taskId, status, result, sessionId) {
        await super.storeTaskResult(taskId, status, result, sessionId);
        const msg = this.pendingStatusMessage.get(taskId);
        this.pendingStatusMessage.delete(taskId);
        const stored = this.tasks.get(taskId);
        if (msg && stored) stored.task.statusMessage = msg;
    }
    async getTaskResult(taskId, sessionId) {
        const err = this.errors.get(taskId);
        if (err && (await this.getTask(taskId, sessionId))) throw err;
        return super.getTaskResult(taskId, sessionId);
    }
}

export const taskStore = new FixtureTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
export const stats = {};
// What the fixture saw of its clients (GET /observed in legacy-server.mjs): the
// capabilities of every initialize, and every error a client answered an input request
// with ({tool, code, message}).
export const observed = { initializes: [], inputErrors: [] };
const count = name => {
    stats[name] = (stats[name] ?? 0) + 1;
};

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function isCancelled(taskId) {
    const t = await taskStore.getTask(taskId);
    return !t || t.status === 'cancelled';
}

// Sleep `seconds`, waking every 100ms to notice a cancel. Returns false when cancelled.
async function sleepUnlessCancelled(taskId, seconds) {
    const end = Date.now() + Math.max(0, seconds) * 1000;
    while (Date.now() < end) {
        if (await isCancelled(taskId)) return false;
        await sleep(Math.min(100, end - Date.now()));
    }
    return !(await isCancelled(taskId));
}

// Store a result unless the task went terminal meanwhile (e.g. cancelled).
async function finish(extra, taskId, status, result, statusMessage) {
    if (await isCancelled(taskId)) return;
    if (statusMessage) taskStore.pendingStatusMessage.set(taskId, statusMessage);
    try {
        await extra.taskStore.storeTaskResult(taskId, status, result);
    } catch (e) {
        // The store is written before the status notification is sent, so this is usually
        // only "Not connected" (the client's session is gone); the result is kept.
        taskStore.pendingStatusMessage.delete(taskId);
        log(`storeTaskResult(${taskId}): ${e.message}`);
    }
}

async function createFixtureTask(name, extra) {
    count(name);
    return extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? DEFAULT_TTL, pollInterval: POLL_INTERVAL });
}

// Background work runs detached from the tools/call request.
function runDetached(taskId, fn) {
    fn().catch(e => log(`task ${taskId} work crashed: ${e?.stack ?? e}`));
}

const taskGetters = {
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId)
};

function computeTool(name, support, defaultSeconds, description) {
    return [
        name,
        {
            description,
            inputSchema: { seconds: z.number().default(defaultSeconds), label: z.string().optional() },
            execution: { taskSupport: support }
        },
        {
            createTask: async ({ seconds }, extra) => {
                const task = await createFixtureTask(name, extra);
                runDetached(task.taskId, async () => {
                    if (!(await sleepUnlessCancelled(task.taskId, seconds))) return;
                    await finish(extra, task.taskId, 'completed', {
                        content: [{ type: 'text', text: `${name} done after ${seconds}s: 42` }],
                        structuredContent: { answer: 42 }
                    });
                });
                return { task };
            },
            ...taskGetters
        }
    ];
}

// ---------------------------------------------------------------------------
// Change notifications (2025-11-25: on the session's GET stream). add_tool {name} registers a
// tool on this session's McpServer (the SDK then sends notifications/tools/list_changed),
// add_resource {name} a resource (notifications/resources/list_changed), and bump_resource
// increments fixture://counter and sends notifications/resources/updated to every session
// that subscribed to it (resources/subscribe, handled here: McpServer does not).
// ---------------------------------------------------------------------------
export const COUNTER_URI = 'fixture://counter';
let counter = 0;
const subscribers = new Map(); // uri -> Set of McpServer

function registerChangeTools(server) {
    server.registerResource('counter', COUNTER_URI, { mimeType: 'text/plain' }, async () => ({
        contents: [{ uri: COUNTER_URI, mimeType: 'text/plain', text: String(counter) }]
    }));
    server.server.setRequestHandler(SubscribeRequestSchema, async req => {
        const set = subscribers.get(req.params.uri) ?? new Set();
        set.add(server);
        subscribers.set(req.params.uri, set);
        count('resources/subscribe');
        return {};
    });
    server.server.setRequestHandler(UnsubscribeRequestSchema, async req => {
        subscribers.get(req.params.uri)?.delete(server);
        count('resources/unsubscribe');
        return {};
    });
    server.server.onclose = () => {
        for (const set of subscribers.values()) set.delete(server);
    };
    server.registerTool('add_tool', { description: 'Adds a sync tool {name} to this session (tools/list_changed)', inputSchema: { name: z.string() } },
        async ({ name }) => {
            count('add_tool');
            server.registerTool(name, { description: 'added by add_tool', inputSchema: {} }, async () => ({ content: [{ type: 'text', text: `Hello from ${name}!` }] }));
            return { content: [{ type: 'text', text: `Added tool ${name}.` }] };
        });
    // The conformance suite's hook (server-stateless, ServerSendsToolsListChangedOnSubscription).
    let triggered = 0;
    server.registerTool('test_trigger_tool_change', { description: 'Adds a tool to this session (tools/list_changed; conformance hook)', inputSchema: {} },
        async () => {
            count('test_trigger_tool_change');
            const name = `triggered_${++triggered}`;
            server.registerTool(name, { description: 'added by test_trigger_tool_change', inputSchema: {} }, async () => ({ content: [{ type: 'text', text: name }] }));
            return { content: [{ type: 'text', text: `Added tool ${name}.` }] };
        });
    // The suite's prompt hook (ServerSendsPromptsListChangedOnSubscription).
    server.registerTool('test_trigger_prompt_change', { description: 'Adds a prompt to this session (prompts/list_changed; conformance hook)', inputSchema: {} },
        async () => {
            count('test_trigger_prompt_change');
            const name = `triggered_prompt_${++triggered}`;
            server.registerPrompt(name, { description: 'added by test_trigger_prompt_change' }, async () => ({
                messages: [{ role: 'user', content: { type: 'text', text: name } }]
            }));
            return { content: [{ type: 'text', text: `Added prompt ${name}.` }] };
        });
    server.registerTool('add_resource', { description: 'Adds a resource fixture://{name} to this session (resources/list_changed)', inputSchema: { name: z.string() } },
        async ({ name }) => {
            count('add_resource');
            const uri = `fixture://${name}`;
            server.registerResource(name, uri, { mimeType: 'text/plain' }, async () => ({ contents: [{ uri, mimeType: 'text/plain', text: name }] }));
            return { content: [{ type: 'text', text: `Added resource ${uri}.` }] };
        });
    server.registerTool('bump_resource', { description: `Increments ${COUNTER_URI} (resources/updated to its subscribers)`, inputSchema: {} },
        async () => {
            count('bump_resource');
            counter++;
            for (const s of subscribers.get(COUNTER_URI) ?? []) await s.server.sendResourceUpdated({ uri: COUNTER_URI }).catch(() => {});
            return { content: [{ type: 'text', text: `${COUNTER_URI} is now ${counter}` }] };
        });
}

export function createServer() {
    const server = new McpServer(
        { name: 'legacy-fixture-server', version: '0.2.0' },
        {
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                logging: {},
                tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }
            },
            taskStore,
            taskMessageQueue,
            instructions: 'taskbridge legacy fixture (2025-11-25 experimental tasks)'
        }
    );

    registerChangeTools(server);

    server.registerTool(
        'greet',
        {
            description: 'sync greeting',
            inputSchema: { name: z.string() },
            annotations: { readOnlyHint: true }
        },
        async ({ name }) => {
            count('greet');
            return { content: [{ type: 'text', text: `Hello, ${name}!` }] };
        }
    );

    // Logs at debug, info, warning and error on the call's own stream (after delayMs), each
    // only when the session's logging/setLevel lets it through, as a server honouring the
    // level does; the result names the levels it sent. sessionWide first sends an error
    // message related to no request (the SDK puts it on the session's GET stream).
    server.registerTool(
        'log_levels',
        { description: 'Sends notifications/message at debug, info, warning and error (session level honoured)', inputSchema: { delayMs: z.number().optional(), sessionWide: z.boolean().optional() } },
        async ({ delayMs, sessionWide }, extra) => {
            count('log_levels');
            if (sessionWide) {
                await server.server.sendLoggingMessage({ level: 'error', logger: 'fixture', data: 'a session-wide message' }, extra.sessionId);
                await new Promise((r) => setTimeout(r, 200));
            }
            if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
            const sent = [];
            for (const level of ['debug', 'info', 'warning', 'error']) {
                if (server.server.isMessageIgnored(level, extra.sessionId)) continue;
                await extra.sendNotification({ method: 'notifications/message', params: { level, logger: 'fixture', data: `a ${level} message` } });
                sent.push(level);
            }
            return { content: [{ type: 'text', text: `sent: ${sent.join(',')}` }] };
        }
    );

    // The conformance suite's server-stateless diagnostic tool: it needs sampling, so a
    // modern caller that did not declare sampling must get -32021 from the bridge.
    server.registerTool(
        'test_missing_capability',
        { description: 'Asks the client to sample (needs the sampling capability)', inputSchema: {} },
        async (_args, extra) => {
            count('test_missing_capability');
            const r = await extra.sendRequest(
                { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }], maxTokens: 10 } },
                CreateMessageResultSchema,
                { timeout: 600000 }
            );
            return { content: [{ type: 'text', text: `sampled: ${r.content?.text ?? ''}` }] };
        }
    );

    // The conformance suite's 2026-07-28 base scenarios (conformance-fixture.mjs).
    registerConformance(server, count);

    server.experimental.tasks.registerToolTask(
        ...computeTool('slow_compute', 'optional', 2, 'Sleeps `seconds` then returns 42 (taskSupport optional)')
    );
    server.experimental.tasks.registerToolTask(
        ...computeTool('long_job', 'required', 3, 'Sleeps `seconds` then returns 42 (taskSupport required)')
    );

    server.experimental.tasks.registerToolTask(
        'failing_job',
        {
            description: 'Tool error after `seconds`: task failed, tasks/result = CallToolResult isError:true (taskSupport required)',
            inputSchema: { seconds: z.number().default(1) },
            execution: { taskSupport: 'required' }
        },
        {
            createTask: async ({ seconds }, extra) => {
                const task = await createFixtureTask('failing_job', extra);
                runDetached(task.taskId, async () => {
                    if (!(await sleepUnlessCancelled(task.taskId, seconds))) return;
                    await finish(
                        extra,
                        task.taskId,
                        'failed',
                        { content: [{ type: 'text', text: 'failing_job: simulated tool failure' }], isError: true },
                        'Tool execution failed: failing_job: simulated tool failure'
                    );
                });
                return { task };
            },
            ...taskGetters
        }
    );

    server.experimental.tasks.registerToolTask(
        'protocol_error_job',
        {
            description: 'Task whose work throws an McpError: task failed, tasks/result = that JSON-RPC error',
            inputSchema: {
                seconds: z.number().default(1),
                code: z.number().int().default(ErrorCode.InternalError),
                message: z.string().default('protocol_error_job: simulated internal failure')
            },
            execution: { taskSupport: 'optional' }
        },
        {
            createTask: async ({ seconds, code, message }, extra) => {
                const task = await createFixtureTask('protocol_error_job', extra);
                runDetached(task.taskId, async () => {
                    if (!(await sleepUnlessCancelled(task.taskId, seconds))) return;
                    try {
                        throw new McpError(code, message, { fixture: 'protocol_error_job' });
                    } catch (err) {
                        taskStore.errors.set(task.taskId, err);
                        // The store needs *some* result object; tasks/result never returns it
                        // because getTaskResult throws `err` for this task.
                        await finish(extra, task.taskId, 'failed', { content: [] }, `Request failed: ${err.message}`);
                    }
                });
                return { task };
            },
            ...taskGetters
        }
    );

    server.experimental.tasks.registerToolTask(
        'confirm_delete',
        {
            description: 'Asks for confirmation via elicitation inside the task (taskSupport required)',
            inputSchema: { filename: z.string() },
            execution: { taskSupport: 'required' }
        },
        {
            createTask: async ({ filename }, extra) => {
                const task = await createFixtureTask('confirm_delete', extra);
                const taskId = task.taskId;
                runDetached(taskId, async () => {
                    await sleep(100);
                    if (await isCancelled(taskId)) return;
                    const message = `Delete ${filename}?`;
                    await extra.taskStore.updateTaskStatus(taskId, 'input_required', message);
                    let answer;
                    try {
                        // relatedTask => the SDK queues the request for delivery on tasks/result
                        // (and adds params._meta["io.modelcontextprotocol/related-task"]).
                        answer = await extra.sendRequest(
                            {
                                method: 'elicitation/create',
                                params: {
                                    mode: 'form',
                                    message,
                                    requestedSchema: {
                                        type: 'object',
                                        properties: { confirm: { type: 'boolean', description: 'confirm deletion' } },
                                        required: ['confirm']
                                    }
                                }
                            },
                            ElicitResultSchema,
                            { relatedTask: { taskId }, timeout: 600000 }
                        );
                    } catch (e) {
                        log(`confirm_delete elicitation failed: ${e.message}`);
                        observed.inputErrors.push({ tool: 'confirm_delete', code: e.code ?? null, message: e.message });
                        await finish(extra, taskId, 'failed', {
                            content: [{ type: 'text', text: `Elicitation failed: ${e.message}` }],
                            isError: true
                        }, `Elicitation failed: ${e.message}`);
                        return;
                    }
                    if (await isCancelled(taskId)) return;
                    try {
                        await extra.taskStore.updateTaskStatus(taskId, 'working');
                    } catch {
                        return;
                    }
                    const ok = answer.action === 'accept' && answer.content?.confirm === true;
                    await finish(extra, taskId, 'completed', {
                        content: [{ type: 'text', text: `${ok ? 'Deleted' : 'Kept'} ${filename}` }]
                    });
                });
                return { task };
            },
            ...taskGetters
        }
    );

    server.experimental.tasks.registerToolTask(
        'multi_input',
        {
            description: 'Asks two questions in parallel (two elicitations on tasks/result), then completes',
            inputSchema: {},
            execution: { taskSupport: 'optional' }
        },
        {
            createTask: async (_args, extra) => {
                const task = await createFixtureTask('multi_input', extra);
                const taskId = task.taskId;
                runDetached(taskId, async () => {
                    await sleep(50);
                    if (await isCancelled(taskId)) return;
                    await extra.taskStore.updateTaskStatus(taskId, 'input_required', 'Two questions pending');
                    const ask = (message, props, required) =>
                        extra.sendRequest(
                            {
                                method: 'elicitation/create',
                                params: { mode: 'form', message, requestedSchema: { type: 'object', properties: props, required } }
                            },
                            ElicitResultSchema,
                            { relatedTask: { taskId }, timeout: 600000 }
                        );
                    let name, confirm;
                    try {
                        [name, confirm] = await Promise.all([
                            ask('What is your name?', { name: { type: 'string' } }, ['name']),
                            ask('Proceed?', { confirm: { type: 'boolean' } }, ['confirm'])
                        ]);
                    } catch (e) {
                        log(`multi_input elicitation failed: ${e.message}`);
                        return;
                    }
                    if (await isCancelled(taskId)) return;
                    try {
                        await extra.taskStore.updateTaskStatus(taskId, 'working');
                    } catch {
                        return;
                    }
                    await finish(extra, taskId, 'completed', {
                        content: [{
                            type: 'text',
                            text: `multi_input: name=${JSON.stringify(name.content?.name ?? '')} (${name.action}), confirm=${confirm.content?.confirm} (${confirm.action})`
                        }]
                    });
                });
                return { task };
            },
            ...taskGetters
        }
    );

    // One question on the tools/call stream *before* the task exists (what 2026-07-28 calls
    // an MRTR round), then a task whose result names the user.
    server.experimental.tasks.registerToolTask(
        'test_tool_with_task',
        {
            description: 'Asks user_name (elicitation on the tools/call stream), then runs a task greeting the user (taskSupport required)',
            inputSchema: {},
            execution: { taskSupport: 'required' }
        },
        {
            createTask: async (_args, extra) => {
                const answer = await extra.sendRequest(
                    {
                        method: 'elicitation/create',
                        params: {
                            mode: 'form',
                            message: 'What is your name?',
                            requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
                        }
                    },
                    ElicitResultSchema,
                    { timeout: 600000 }
                );
                const name = (answer.action === 'accept' && (answer.content?.name || answer.content?.user_name)) || 'anonymous';
                const task = await createFixtureTask('test_tool_with_task', extra);
                runDetached(task.taskId, async () => {
                    await sleep(200);
                    await finish(extra, task.taskId, 'completed', {
                        content: [{ type: 'text', text: `Hello, ${name}! Your task is complete.` }]
                    });
                });
                return { task };
            },
            ...taskGetters
        }
    );

    return server;
}
