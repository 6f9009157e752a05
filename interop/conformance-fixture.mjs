// conformance-fixture.mjs: the tools, prompts and resources the conformance suite's
// 2026-07-28 base server scenarios call (tools-call-*, prompts-*, resources-*,
// completion-complete, json-schema-2020-12, sep-2164-resource-not-found, caching and the
// input-required-result-* scenarios), written as a 2025-11-25 server on the TS SDK v1:
// input comes from server→client requests (elicitation/create, sampling/createMessage,
// roots/list) on the request's own stream, which taskbridge's reverse route turns into
// MRTR inputRequests for a 2026-07-28 client.
//
// Each input request names the MRTR key it wants in params._meta["dev.taskbridge/inputKey"]
// (the suite expects e.g. "user_name"); a 2025-11-25 server has no other way to choose
// it. See docs/reverse.md ("MRTR for synchronous phases").

import { z } from 'zod';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CreateMessageResultSchema, ElicitResultSchema, ListRootsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

export const INPUT_KEY = 'dev.taskbridge/inputKey';

// A 1x1 PNG and a tiny WAV (44-byte header, no samples).
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

// The json-schema-2020-12 scenario's tool schema: every keyword must survive tools/list.
const JSON_SCHEMA_2020_12 = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' }
    },
    allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
    if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
    then: { required: ['phone'] },
    else: { required: ['email'] },
    additionalProperties: false
};

const NO_WAIT = { timeout: 600000 };
const sleep = ms => new Promise(r => setTimeout(r, ms));

// The server→client requests, each naming its MRTR key.
function elicit(extra, key, message, props, required) {
    return extra.sendRequest(
        { method: 'elicitation/create', params: { mode: 'form', message, requestedSchema: { type: 'object', properties: props, required }, _meta: { [INPUT_KEY]: key } } },
        ElicitResultSchema,
        NO_WAIT
    );
}
function sample(extra, key, text, maxTokens) {
    return extra.sendRequest(
        { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens, _meta: { [INPUT_KEY]: key } } },
        CreateMessageResultSchema,
        NO_WAIT
    );
}
function listRoots(extra, key) {
    return extra.sendRequest({ method: 'roots/list', params: { _meta: { [INPUT_KEY]: key } } }, ListRootsResultSchema, NO_WAIT);
}
const text = t => ({ content: [{ type: 'text', text: t }] });
const sampledText = r => (r.content?.type === 'text' ? r.content.text : '');

export function registerConformance(server, count) {
    const tool = (name, description, cb) =>
        server.registerTool(name, { description, inputSchema: {} }, async (args, extra) => {
            count(name);
            return cb(args, extra);
        });

    tool('test_simple_text', 'Returns one text item', async () => text('This is a simple text response for testing.'));
    tool('test_image_content', 'Returns one image item', async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
    tool('test_audio_content', 'Returns one audio item', async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
    tool('test_embedded_resource', 'Returns one embedded resource', async () => ({
        content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
    }));
    tool('test_multiple_content_types', 'Returns text, image and an embedded resource', async () => ({
        content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: PNG, mimeType: 'image/png' },
            { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }
        ]
    }));
    tool('test_error_handling', 'Always fails with a tool error', async () => ({
        isError: true,
        content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }]
    }));
    tool('test_tool_with_progress', 'Reports progress three times on its request stream, then answers', async (_args, extra) => {
        const token = extra._meta?.progressToken;
        for (let i = 0; i <= 2; i++) {
            if (token !== undefined) {
                await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i * 50, total: 100, message: `step ${i + 1}` } });
            }
            await sleep(20);
        }
        return text('progress done');
    });
    tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', async () => text('json schema tool called'));
    // x-mcp-header (http-custom-header-server-validation): a 2026-07-28 client mirrors region
    // into Mcp-Param-Region; the bridge, the 2026-07-28 server here, checks it.
    server.registerTool(
        'test_param_header',
        { description: 'Echoes region, which 2026-07-28 clients mirror into the Mcp-Param-Region header', inputSchema: { region: z.string(), query: z.string().optional() } },
        async ({ region }) => {
            count('test_param_header');
            return text(`region=${region}`);
        }
    );

    // MRTR (input-required-result-*): each asks on its tools/call stream.
    tool('test_input_required_result_elicitation', 'Asks the user for a name (elicitation), then greets', async (_a, extra) => {
        const r = await elicit(extra, 'user_name', 'What is your name?', { name: { type: 'string' } }, ['name']);
        return text(`Hello, ${r.content?.name ?? 'anonymous'}!`);
    });
    tool('test_input_required_result_sampling', 'Asks the client to sample, then quotes it', async (_a, extra) => {
        const r = await sample(extra, 'capital_question', 'What is the capital of France?', 100);
        return text(`The model said: ${sampledText(r)}`);
    });
    tool('test_input_required_result_list_roots', 'Asks for the client roots, then lists them', async (_a, extra) => {
        const r = await listRoots(extra, 'client_roots');
        return text(`Roots: ${(r.roots ?? []).map(x => x.uri).join(', ')}`);
    });
    tool('test_input_required_result_request_state', 'Asks for a confirmation, then answers state-ok', async (_a, extra) => {
        const r = await elicit(extra, 'confirm', 'Please confirm', { ok: { type: 'boolean' } }, ['ok']);
        return text(`state-ok: confirmed=${r.content?.ok === true}`);
    });
    tool('test_input_required_result_tampered_state', 'Asks for a confirmation, then answers', async (_a, extra) => {
        const r = await elicit(extra, 'confirm', 'Please confirm', { ok: { type: 'boolean' } }, ['ok']);
        return text(`confirmed=${r.content?.ok === true}`);
    });
    tool('test_input_required_result_multiple_inputs', 'Asks an elicitation, a sampling and roots/list at once', async (_a, extra) => {
        const [name, greeting, roots] = await Promise.all([
            elicit(extra, 'user_name', 'What is your name?', { name: { type: 'string' } }, ['name']),
            sample(extra, 'greeting', 'Generate a greeting', 50),
            listRoots(extra, 'client_roots')
        ]);
        return text(`${sampledText(greeting)} ${name.content?.name ?? ''} (${(roots.roots ?? []).length} roots)`);
    });
    tool('test_input_required_result_multi_round', 'Asks two questions one after the other, then answers', async (_a, extra) => {
        const name = await elicit(extra, 'step1', 'Step 1: What is your name?', { name: { type: 'string' } }, ['name']);
        const color = await elicit(extra, 'step2', 'Step 2: What is your favorite color?', { color: { type: 'string' } }, ['color']);
        return text(`${name.content?.name ?? ''} likes ${color.content?.color ?? ''}`);
    });
    // Asks only what the client declared to this server (its initialize capabilities).
    tool('test_input_required_result_capabilities', 'Asks for each input kind the client declared', async (_a, extra) => {
        const caps = server.server.getClientCapabilities() ?? {};
        const asks = [];
        if (caps.sampling) asks.push(sample(extra, 'capability_sampling', 'Say hello', 20).then(sampledText));
        if (caps.elicitation) asks.push(elicit(extra, 'capability_elicitation', 'Your name?', { name: { type: 'string' } }, ['name']).then(r => r.action));
        const got = await Promise.all(asks);
        return text(`asked ${asks.length}: ${got.join(', ')}`);
    });

    // tools/list: the SDK v1 turns every inputSchema into JSON Schema from zod, which cannot
    // say $defs/$anchor/if/then/else or x-mcp-header; the fixture puts those schemas in after it.
    const inner = server.server._requestHandlers.get('tools/list');
    server.server._requestHandlers.set('tools/list', async (req, extra) => {
        const res = await inner(req, extra);
        for (const t of res.tools ?? []) {
            if (t.name === 'json_schema_2020_12_tool') t.inputSchema = JSON_SCHEMA_2020_12;
            if (t.name === 'test_param_header') t.inputSchema.properties.region['x-mcp-header'] = 'Region';
        }
        return res;
    });

    // Prompts.
    // (The SDK calls a prompt without argsSchema with extra alone.)
    const prompt = (name, config, cb) =>
        server.registerPrompt(name, config, async (...a) => {
            count(name);
            return config.argsSchema ? cb(a[0], a[1]) : cb({}, a[0]);
        });
    const user = content => ({ role: 'user', content });
    prompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () => ({
        messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })]
    }));
    prompt(
        'test_prompt_with_arguments',
        {
            description: 'A prompt with two arguments (arg1 completes)',
            argsSchema: {
                arg1: completable(z.string().describe('First test argument'), v => ['test1', 'test2', 'testValue1'].filter(x => x.startsWith(v ?? ''))),
                arg2: z.string().describe('Second test argument')
            }
        },
        async ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] })
    );
    prompt(
        'test_prompt_with_embedded_resource',
        { description: 'A prompt that embeds a resource', argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') } },
        async ({ resourceUri }) => ({
            messages: [
                user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
                user({ type: 'text', text: 'Please process the embedded resource above.' })
            ]
        })
    );
    prompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
        messages: [user({ type: 'image', data: PNG, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })]
    }));
    prompt('test_input_required_result_prompt', { description: 'Asks the user for context (elicitation), then builds the prompt' }, async (_a, extra) => {
        const r = await elicit(extra, 'user_context', 'What context should the prompt use?', { context: { type: 'string' } }, ['context']);
        return { messages: [user({ type: 'text', text: `Prompt with context: ${r.content?.context ?? ''}` })] };
    });

    // Resources.
    server.registerResource('static-text', 'test://static-text', { description: 'A static text resource', mimeType: 'text/plain' }, async uri => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }]
    }));
    server.registerResource('static-binary', 'test://static-binary', { description: 'A static binary resource', mimeType: 'image/png' }, async uri => ({
        contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }]
    }));
    server.registerResource(
        'template',
        new ResourceTemplate('test://template/{id}/data', { list: undefined }),
        { description: 'A resource template with one parameter', mimeType: 'application/json' },
        async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] })
    );
    // Any other test://name: the 2025-11-25 "resource not found" error (-32002, data.uri),
    // which the bridge's modern face renumbers to -32602 (SEP-2164).
    server.registerResource(
        'missing',
        new ResourceTemplate('test://{name}', { list: undefined }),
        { description: 'Not found: every test:// URI without a resource' },
        async uri => {
            throw new McpError(-32002, 'Resource not found', { uri: uri.href });
        }
    );
}
