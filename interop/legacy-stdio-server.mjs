#!/usr/bin/env node
// legacy-stdio-server.mjs: the 2025-11-25 task server of legacy-server.mjs (the same tools,
// task store and McpServer, legacy-fixture.mjs) over stdio, with the TypeScript SDK v1's
// StdioServerTransport: one session, the process's stdin/stdout. The most common kind of
// server in the field; taskbridge runs it as a child with `serve --upstream-cmd`.
//
//   node legacy-stdio-server.mjs [--stats-file PATH]
//
// stdout carries only JSON-RPC; logs go to stderr. --stats-file is rewritten (temp file +
// rename) after every tool execution: {"<tool>": executions, …}, as legacy-server.mjs's
// GET /stats. stdin closing ends the process (after the transport closes); so do SIGINT
// and SIGTERM.
process.env.LEGACY_FIXTURE_NAME ??= 'legacy-stdio-server';

import fs from 'node:fs';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { argValue, createServer, log, stats, taskStore } from './legacy-fixture.mjs';

const statsFile = argValue('--stats-file', '');

// writeStats publishes stats atomically whenever a tool has run.
let last = '';
function writeStats() {
    if (!statsFile) return;
    const now = JSON.stringify(stats);
    if (now === last) return;
    last = now;
    fs.writeFileSync(statsFile + '.tmp', now);
    fs.renameSync(statsFile + '.tmp', statsFile);
}
const timer = setInterval(writeStats, 20);

const server = createServer();
const transport = new StdioServerTransport();
function stop() {
    clearInterval(timer);
    writeStats();
    taskStore.cleanup();
    process.exit(0);
}
transport.onclose = stop;
process.stdin.on('end', stop);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, stop);
await server.connect(transport);
writeStats();
log('serving on stdio');
