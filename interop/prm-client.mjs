#!/usr/bin/env node
// prm-client.mjs: what a TS SDK v1 (@modelcontextprotocol/sdk 1.32.2) client does first
// against an MCP server that wants OAuth: send a request without a token, read the 401's
// WWW-Authenticate with the SDK's own parser, fetch the RFC 9728 protected-resource metadata
// with the SDK's discovery (from the header's URL, and again by the well-known fallback the
// SDK uses when there is no header), and check the metadata's resource against the server
// URL as the SDK does before asking an authorization server for a token. Then it connects
// with a token it was given and lists tools.
//
//   node prm-client.mjs --url URL --token JWT
//
// Prints exactly one JSON line: {ok, unauthorized: {status, wwwAuthenticate, resourceMetadataUrl,
// scope, error}, badToken: {status, error}, metadata, wellKnownMetadata, resource, tools,
// failures}. Exit 1 with {crash} only when the script itself breaks.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    extractWWWAuthenticateParams,
    discoverOAuthProtectedResourceMetadata,
    selectResourceURL
} from '@modelcontextprotocol/sdk/client/auth.js';

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];

const initialize = JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'prm-client', version: '1.0.0' } }
});

async function post(token) {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const res = await fetch(args.url, { method: 'POST', headers, body: initialize });
    await res.body?.cancel();
    return res;
}

try {
    const out = { ok: true, failures: [] };
    const fail = msg => { out.ok = false; out.failures.push(msg); };

    const res = await post(null);
    const p = extractWWWAuthenticateParams(res);
    out.unauthorized = { status: res.status, wwwAuthenticate: res.headers.get('WWW-Authenticate'),
        resourceMetadataUrl: p.resourceMetadataUrl?.href ?? null, scope: p.scope ?? null, error: p.error ?? null };
    if (res.status !== 401) fail(`no token: HTTP ${res.status}, want 401`);
    if (!p.resourceMetadataUrl) fail('no resource_metadata in WWW-Authenticate');

    const bad = await post('eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln');
    out.badToken = { status: bad.status, error: extractWWWAuthenticateParams(bad).error ?? null };

    out.metadata = await discoverOAuthProtectedResourceMetadata(args.url, { resourceMetadataUrl: p.resourceMetadataUrl });
    out.wellKnownMetadata = await discoverOAuthProtectedResourceMetadata(args.url);
    // Throws when the metadata's resource does not cover the server URL.
    out.resource = (await selectResourceURL(args.url, {}, out.metadata))?.href ?? null;

    const client = new Client({ name: 'prm-client', version: '1.0.0' }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(args.url),
        { requestInit: { headers: { Authorization: `Bearer ${args.token}` } } });
    await client.connect(transport);
    out.tools = (await client.listTools()).tools.map(t => t.name);
    await client.close();
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
} catch (e) {
    const cause = e?.cause ? `\ncause: ${String(e.cause?.stack ?? e.cause)}` : '';
    process.stdout.write(JSON.stringify({ ok: false, crash: String(e?.stack ?? e) + cause }) + '\n');
    process.exit(1);
}
