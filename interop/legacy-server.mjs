#!/usr/bin/env node
// legacy-server.mjs: an MCP 2025-11-25 *experimental Tasks* server built on the real
// TypeScript SDK v1 (@modelcontextprotocol/sdk@1.32.2): McpServer + StreamableHTTPServerTransport
// (stateful sessions), InMemoryTaskStore + InMemoryTaskMessageQueue.
//
// Used by taskbridge's interop tests as a legacy (2025-11-25) upstream, and to prove
// legacy-client.mjs right.
//
//   node legacy-server.mjs [--port N] [--host 127.0.0.1]
//
// First stdout line: `listening http://127.0.0.1:PORT/mcp`. Everything else goes to stderr.
// GET /stats -> {"greet":1,"slow_compute":2,...} (executions per tool, and "responses": the
// JSON-RPC responses clients POSTed, i.e. answers to the server's questions, counted as they
// arrive, duplicates included); DELETE /stats resets.
// GET /observed -> {"initializes":[<capabilities>...],"inputErrors":[{tool,code,message}...]}
// (what clients declared, and how they refused input requests).
// GET /healthz -> "ok".
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { argValue, createServer, log, observed, stats, taskStore } from './legacy-fixture.mjs';

const port = Number(argValue('--port', '0'));
const host = argValue('--host', '127.0.0.1');

// ---------------------------------------------------------------------------
// HTTP: one MCP endpoint (/mcp), stateful sessions (one McpServer per session; the task
// store and message queue are shared, the store scopes tasks by session id).
// ---------------------------------------------------------------------------
const transports = new Map();

function readBody(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        req.on('data', c => chunks.push(c));
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        req.on('error', reject);
    });
}

function jsonError(res, status, code, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
    try {
        const url = new URL(req.url, 'http://localhost');
        if (url.pathname === '/stats') {
            if (req.method === 'DELETE') for (const k of Object.keys(stats)) delete stats[k];
            res.writeHead(200, { 'Content-Type': 'application/json' });
            res.end(JSON.stringify(stats));
            return;
        }
        if (url.pathname === '/observed') {
            res.writeHead(200, { 'Content-Type': 'application/json' });
            res.end(JSON.stringify(observed));
            return;
        }
        if (url.pathname === '/healthz') {
            res.writeHead(200, { 'Content-Type': 'text/plain' });
            res.end('ok');
            return;
        }
        if (url.pathname !== '/mcp') {
            res.writeHead(404).end();
            return;
        }
        const sid = req.headers['mcp-session-id'];
        if (req.method === 'POST') {
            const raw = await readBody(req);
            let body;
            try {
                body = JSON.parse(raw);
            } catch {
                return jsonError(res, 400, -32700, 'Parse error');
            }
            for (const m of Array.isArray(body) ? body : [body]) {
                if (m && m.id !== undefined && m.method === undefined && ('result' in m || 'error' in m)) {
                    stats.responses = (stats.responses ?? 0) + 1;
                }
            }
            if (sid) {
                const t = transports.get(sid);
                if (!t) return jsonError(res, 404, -32001, 'Session not found');
                return await t.handleRequest(req, res, body);
            }
            if (!isInitializeRequest(body)) return jsonError(res, 400, -32000, 'Bad Request: No valid session ID provided');
            observed.initializes.push(body.params?.capabilities ?? null);
            const transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: id => {
                    transports.set(id, transport);
                    log(`session ${id} initialized`);
                }
            });
            transport.onclose = () => {
                if (transport.sessionId) transports.delete(transport.sessionId);
            };
            const server = createServer();
            await server.connect(transport);
            return await transport.handleRequest(req, res, body);
        }
        if (req.method === 'GET' || req.method === 'DELETE') {
            const t = sid && transports.get(sid);
            if (!t) return jsonError(res, sid ? 404 : 400, -32000, 'Invalid or missing session ID');
            return await t.handleRequest(req, res);
        }
        res.writeHead(405, { Allow: 'GET, POST, DELETE' }).end();
    } catch (e) {
        log('request failed:', e?.stack ?? e);
        if (!res.headersSent) jsonError(res, 500, -32603, 'Internal server error');
    }
});

httpServer.listen(port, host, () => {
    const a = httpServer.address();
    process.stdout.write(`listening http://${host}:${a.port}/mcp\n`);
});

for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
        httpServer.close();
        taskStore.cleanup();
        process.exit(0);
    });
}
