// `spillguard mcp` driven by the official MCP TypeScript SDK's client
// (`@modelcontextprotocol/sdk`, installed by .ci/peers.sh into
// target/peers/npm). Plain Node ESM, no build step.
//
//     node tests/peers/mcp_bridge.mjs PATH/TO/spillguard PATH/TO/mcp_tools.toml
//
// The SDK is loaded from $SPILLGUARD_PEERS/npm (default: target/peers/npm
// of this checkout). Every fact is printed as it is checked; the first wrong
// one ends the run with exit status 1. What it drives, with the tools of
// tests/peers/mcp_tools.toml:
//
// * tools/list: the exact names and the exact input schema of `flood`;
// * a 64 MiB stderr flood: result intact, stderr counted, excerpt bounded
//   and marked, pings answered while it ran;
// * the approval card through elicitation/create: accepted, declined,
//   dismissed, expired (the client answers too late), and a client without
//   the elicitation capability (refused, fail closed);
// * invalid arguments, and a helper that cannot be spawned: refused before
//   dispatch with the exact failure text;
// * a made-up token on stderr and in results: redacted in the excerpt and
//   the result, counted, and absent from stdout and the audit log;
// * a cancel mid-call (notifications/cancelled from an AbortSignal);
// * a disconnect under `--on-disconnect cancel` with two helpers running
//   and a card nobody answers;
// * the audit logs: every call's final state, in order, and the chain;
// * stdout byte by byte: every line the server wrote is a JSON-RPC 2.0
//   message, one response per client request, none for the cancelled one;
// * the time from tools/call to the card, quiet and during a 1 GiB flood
//   (printed, not asserted).

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MiB = 1024 * 1024;
const FLOOD_BYTES = 64 * MiB;
const BIG_FLOOD_BYTES = 1024 * MiB;
const EXCERPT_BUDGET = 4096;
const LATENCY_ROUNDS = 20;
const LINE = 'helper-diagnostic\n';

const started = performance.now();

if (process.argv.length !== 4) {
    console.error('usage: node tests/peers/mcp_bridge.mjs PATH/TO/spillguard PATH/TO/mcp_tools.toml');
    process.exit(2);
}
const spillguard = path.resolve(process.argv[2]);
const toolsFile = path.resolve(process.argv[3]);
const here = path.dirname(fileURLToPath(import.meta.url));
const peers = path.resolve(process.env.SPILLGUARD_PEERS ?? path.join(here, '../../../../target/peers'));
const sdkRoot = path.join(peers, 'npm/node_modules/@modelcontextprotocol/sdk');
const sdk = (file) => import(pathToFileURL(path.join(sdkRoot, 'dist/esm', file)).href);

const { Client } = await sdk('client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = await sdk('client/stdio.js');
const { CallToolResultSchema, ElicitRequestSchema } = await sdk('types.js');
const sdkVersion = JSON.parse(fs.readFileSync(path.join(sdkRoot, 'package.json'), 'utf8')).version;

// ---------------------------------------------------------------------------
// Reporting

let checks = 0;
/** Checks that `actual` deep-equals `expected`; prints the fact. */
function check(label, actual, expected) {
    try {
        assert.deepStrictEqual(actual, expected);
    } catch {
        fail(`${label}: expected ${show(expected)}, got ${show(actual)}`);
    }
    checks += 1;
    console.log(`ok   ${label}: ${show(actual)}`);
}
/** Checks a condition that has no single expected value. */
function checkThat(label, condition, detail) {
    if (!condition) fail(`${label} (${detail})`);
    checks += 1;
    console.log(`ok   ${label}: ${detail}`);
}
function measured(label, value) {
    console.log(`info ${label}: ${value}`);
}
function fail(message) {
    console.error(`FAIL ${message}`);
    for (const server of servers) {
        if (server.stderr.length > 0) {
            console.error(`---- stderr of ${server.name} (last ${server.stderr.length} bytes)`);
            console.error(server.stderr);
        }
    }
    process.exit(1);
}
function show(value) {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const ms = (t) => `${t.toFixed(1)} ms`;

/** Polls `probe` every 10 ms until it returns a value other than undefined. */
async function until(label, probe, timeoutMs = 10_000) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
        const value = probe();
        if (value !== undefined) return value;
        if (performance.now() > deadline) fail(`timed out after ${timeoutMs} ms waiting for ${label}`);
        await sleep(10);
    }
}

function percentile(values, p) {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// ---------------------------------------------------------------------------
// Servers and clients

const dir = fs.mkdtempSync('/tmp/sg-ts-');
const servers = [];

/**
 * Starts `spillguard mcp --tools FILE ...extra` under `sh`, which copies the
 * server's stdout to `tap` (when given) and writes its exit status to
 * `status`; connects a client to it.
 */
async function connect(name, { extra = [], tap, elicitation = true }) {
    const status = path.join(dir, `${name}.status`);
    const script = tap
        ? '{ "$0" "$@"; echo $? > "$SG_STATUS"; } | tee "$SG_TAP"'
        : '"$0" "$@"; echo $? > "$SG_STATUS"';
    const transport = new StdioClientTransport({
        command: 'sh',
        args: ['-c', script, spillguard, 'mcp', '--tools', toolsFile, ...extra],
        env: { ...getDefaultEnvironment(), SG_STATUS: status, SG_TAP: tap ?? '' },
        stderr: 'pipe',
    });
    const server = { name, status, stderr: '', sent: [] };
    servers.push(server);
    // The requests the client sends, to match the server's responses.
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        if ('method' in message && 'id' in message) {
            server.sent.push({ id: message.id, method: message.method, tool: message.params?.name });
        }
        return send(message, options);
    };
    transport.stderr.on('data', (chunk) => {
        server.stderr = (server.stderr + chunk.toString()).slice(-16384);
    });
    const capabilities = elicitation ? { elicitation: {} } : {};
    const client = new Client({ name: 'spillguard-ts-check', version: '1.0.0' }, { capabilities });
    client.onerror = (error) => {
        server.clientErrors = (server.clientErrors ?? []).concat(String(error));
    };
    await client.connect(transport);
    return { client, transport, server };
}

/** The exit status the server's wrapper recorded, once it exited. */
async function exitStatus(server, timeoutMs = 10_000) {
    return until(
        `${server.name} to exit`,
        () => {
            try {
                const text = fs.readFileSync(server.status, 'utf8');
                return text.endsWith('\n') ? Number(text.trim()) : undefined;
            } catch {
                return undefined;
            }
        },
        timeoutMs,
    );
}

function activity(log) {
    const out = execFileSync(spillguard, ['audit', 'activity', log, '--json'], { encoding: 'utf8' });
    return out.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
}

/** The verdict of `audit verify LOG --json` (exit 3: intact but unanchored). */
function verify(log) {
    const run = spawnSync(spillguard, ['audit', 'verify', log, '--json'], { encoding: 'utf8' });
    return { status: run.status, ...JSON.parse(run.stdout) };
}

function sessions(log) {
    const out = execFileSync(spillguard, ['audit', 'sessions', log, '--json'], { encoding: 'utf8' });
    return out.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
}

/** Whether process `pid` exists (signal 0). */
function alive(pid) {
    try {
        process.kill(pid, 0);
        return true;
    } catch (error) {
        if (error.code === 'ESRCH') return false;
        throw error;
    }
}

/** The pid a `sleep` helper wrote to `pidfile`, once it is there. */
function waitPid(pidfile) {
    return until(`the pid in ${pidfile}`, () => {
        try {
            const text = fs.readFileSync(pidfile, 'utf8');
            return text.endsWith('\n') ? Number(text.trim()) : undefined;
        } catch {
            return undefined;
        }
    });
}

// The one elicitation handler of every client: it answers with what
// `answer` says, after recording the request.
const elicitations = [];
let answer = async () => ({ action: 'decline' });

function onElicit(client) {
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
        const seen = { at: performance.now(), message: request.params.message, request, aborted: false };
        extra.signal.addEventListener('abort', () => {
            seen.aborted = true;
            seen.abortedAt = performance.now();
        });
        elicitations.push(seen);
        return answer(seen, extra);
    });
}

function card(pathName) {
    return [
        'tool: touch',
        'description: create the file PATH',
        `target: ${pathName}`,
        `command: touch -- ${pathName}`,
        'deadline: host default',
        'approval expires: 1500 ms after it is shown',
    ].join('\n');
}

const LONG = { timeout: 600_000 };

// ---------------------------------------------------------------------------
// Server 1: list, flood, approvals, invalid arguments, cancel, latency

console.log(`spillguard mcp driven by @modelcontextprotocol/sdk ${sdkVersion} (node ${process.version})`);
console.log(`work dir ${dir}`);
const log1 = path.join(dir, 'main.log');
const tap = path.join(dir, 'main.stdout');
const main = await connect('main', { extra: ['--audit', log1], tap });
const client = main.client;
onElicit(client);
const expected = []; // the state of every call on server 1, in order
let cancelledId; // the JSON-RPC id of the cancelled tools/call

check('server name', client.getServerVersion()?.name, 'spillguard');
check('server declares tools', typeof client.getServerCapabilities()?.tools, 'object');

// tools/list
{
    const { tools } = await client.listTools();
    check('tool names', tools.map((t) => t.name).sort(), ['flood', 'leak', 'leak_text', 'missing', 'not_json', 'sleep', 'touch']);
    const flood = tools.find((t) => t.name === 'flood');
    check('flood description', flood.description, 'write BYTES bytes to stderr, then a JSON result');
    check('flood inputSchema', flood.inputSchema, {
        type: 'object',
        properties: { bytes: { type: 'integer', minimum: 0, maximum: 4294967296 } },
        required: ['bytes'],
        additionalProperties: false,
    });
}

// The 64 MiB flood, with pings answered while it runs.
{
    const t0 = performance.now();
    let done = false;
    const call = client.callTool({ name: 'flood', arguments: { bytes: FLOOD_BYTES } }, undefined, LONG);
    call.finally(() => {
        done = true;
    });
    const pings = [];
    while (!done) {
        const p0 = performance.now();
        await client.ping();
        if (!done) pings.push(performance.now() - p0);
        await sleep(20);
    }
    const result = await call;
    const elapsed = performance.now() - t0;
    expected.push('completed');
    const s = result.structuredContent;
    check('flood 64 MiB: isError', result.isError ?? false, false);
    check('flood 64 MiB: state', s.state, 'completed');
    check('flood 64 MiB: exit_status', s.exit_status, 0);
    check('flood 64 MiB: result', s.result, { ok: true, bytes: FLOOD_BYTES });
    check('flood 64 MiB: result_kind', s.result_kind, 'success');
    check('flood 64 MiB: stderr_bytes_seen', s.stderr_bytes_seen, FLOOD_BYTES);
    // flood is a discovery: its own stderr budget, 4096 bytes.
    check('flood 64 MiB: stderr_bytes_retained', s.stderr_bytes_retained, 4096);
    check('flood 64 MiB: stderr_truncated', s.stderr_truncated, true);
    check('flood 64 MiB: approval', s.approval, 'not_required');
    // The stream is LINE repeated and cut at 64 MiB: it ends with the
    // first 4 bytes of a line. The excerpt keeps, after its marker line,
    // the longest suffix that fits the 4096-byte budget (the marker's
    // room is reserved for the widest count) and starts at a line.
    const excerpt = s.stderr_excerpt;
    const bytes = Buffer.byteLength(excerpt);
    checkThat('flood 64 MiB: excerpt within the budget', bytes <= EXCERPT_BUDGET, `${bytes} bytes`);
    const newline = excerpt.indexOf('\n');
    const marker = excerpt.slice(0, newline);
    const kept = excerpt.slice(newline + 1);
    const widest = `[stderr truncated: kept last ${FLOOD_BYTES} of ${FLOOD_BYTES} bytes]`.length + 1;
    const room = EXCERPT_BUDGET - widest;
    const partial = FLOOD_BYTES % LINE.length;
    const keptLines = Math.floor((room - partial) / LINE.length);
    const keptBytes = keptLines * LINE.length + partial;
    check('flood 64 MiB: excerpt marker', marker, `[stderr truncated: kept last ${keptBytes} of ${FLOOD_BYTES} bytes]`);
    check('flood 64 MiB: excerpt text after the marker', kept, LINE.repeat(keptLines) + LINE.slice(0, partial));
    check('flood 64 MiB: one text content block, the result itself', JSON.parse(result.content[0].text), s.result);
    checkThat('flood 64 MiB: pings answered while it ran', pings.length > 0, `${pings.length}, slowest ${ms(Math.max(...pings))}`);
    measured('flood 64 MiB: call time', ms(elapsed));
}

// Approval accepted.
{
    const file = path.join(dir, 'approved');
    answer = async () => ({ action: 'accept', content: {} });
    const before = elicitations.length;
    const result = await client.callTool({ name: 'touch', arguments: { path: file } });
    expected.push('completed');
    check('approve: one elicitation', elicitations.length - before, 1);
    check('approve: elicitation message is the card', elicitations.at(-1).message, card(file));
    check('approve: requestedSchema', elicitations.at(-1).request.params.requestedSchema, { type: 'object', properties: {} });
    check('approve: isError', result.isError ?? false, false);
    check('approve: state', result.structuredContent.state, 'completed');
    check('approve: approval', result.structuredContent.approval, 'granted');
    check('approve: exit_status', result.structuredContent.exit_status, 0);
    check('approve: file created', fs.existsSync(file), true);
}

// Approval accepted with no content: the card's form has no field, so a
// client may leave `content` out.
{
    const file = path.join(dir, 'approved-bare');
    answer = async () => ({ action: 'accept' });
    const result = await client.callTool({ name: 'touch', arguments: { path: file } });
    expected.push('completed');
    check('approve without content: state', result.structuredContent.state, 'completed');
    check('approve without content: approval', result.structuredContent.approval, 'granted');
    check('approve without content: exit_status', result.structuredContent.exit_status, 0);
    check('approve without content: file created', fs.existsSync(file), true);
}

// Approval declined.
{
    const file = path.join(dir, 'declined');
    answer = async () => ({ action: 'decline' });
    const result = await client.callTool({ name: 'touch', arguments: { path: file } });
    expected.push('denied');
    check('decline: elicitation message is the card', elicitations.at(-1).message, card(file));
    check('decline: isError', result.isError, true);
    check('decline: state', result.structuredContent.state, 'denied');
    check('decline: approval', result.structuredContent.approval, 'denied');
    check('decline: pid (nothing spawned)', result.structuredContent.pid, null);
    check('decline: file absent', fs.existsSync(file), false);
}

// The card dismissed (action "cancel"): nobody approved, nothing ran.
{
    const file = path.join(dir, 'dismissed');
    answer = async () => ({ action: 'cancel' });
    const result = await client.callTool({ name: 'touch', arguments: { path: file } });
    expected.push('cancelled_before_dispatch');
    check('dismiss: elicitation message is the card', elicitations.at(-1).message, card(file));
    check('dismiss: isError', result.isError, true);
    check('dismiss: state', result.structuredContent.state, 'cancelled_before_dispatch');
    check('dismiss: pid (nothing spawned)', result.structuredContent.pid, null);
    check('dismiss: file absent', fs.existsSync(file), false);
}

// A helper that cannot be spawned.
{
    const result = await client.callTool({ name: 'missing', arguments: {} });
    expected.push('failed_before_dispatch');
    const r = result.structuredContent;
    check('missing: isError', result.isError, true);
    check('missing: state', r.state, 'failed_before_dispatch');
    check('missing: spawn_error_kind', r.spawn_error_kind, 'not_found');
    check('missing: failure', r.failure, 'spawn failed: /nonexistent/spillguard-helper: NotFound: No such file or directory (os error 2)');
    check('missing: pid and exit_status', [r.pid, r.exit_status], [null, null]);
    check('missing: the text a model reads', result.content,
        [{ type: 'text', text: 'tool missing did not complete: state failed_before_dispatch, no exit status; spawn failed: /nonexistent/spillguard-helper: NotFound: No such file or directory (os error 2). No stderr.' }]);
}

// A made-up token on stderr and in the result: redacted in both, counted.
const SECRET = 'ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8';
for (const [tool, shown] of [
    ['leak', { note: 'pushed with [redacted: github-token]', rows: 3 }],
    ['leak_text', 'pushed with [redacted: github-token]\n'],
]) {
    const result = await client.callTool({ name: tool, arguments: {} });
    expected.push('completed');
    const r = result.structuredContent;
    check(`${tool}: state`, r.state, 'completed');
    check(`${tool}: result`, r.result, shown);
    check(`${tool}: stderr_excerpt`, r.stderr_excerpt, 'push failed for [redacted: github-token]\n');
    check(`${tool}: redactions`, [r.stderr_redactions, r.stdout_redactions], [1, 1]);
}

// A JSON result promised and not given: completed, but an error.
{
    const result = await client.callTool({ name: 'not_json', arguments: {} });
    expected.push('completed');
    const r = result.structuredContent;
    check('not_json: isError, state, result', [result.isError, r.state, r.result], [true, 'completed', null]);
    check('not_json: result_error', r.result_error, 'invalid JSON at line 1 column 2: expected ident');
}

// Approval expired: the client answers after 3 s, the card expires at 1.5 s.
{
    const file = path.join(dir, 'expired');
    let lateAnswer;
    answer = async () => {
        await sleep(3000);
        lateAnswer = performance.now();
        return { action: 'accept', content: {} };
    };
    const t0 = performance.now();
    const result = await client.callTool({ name: 'touch', arguments: { path: file } });
    const elapsed = performance.now() - t0;
    expected.push('approval_expired');
    const seen = elicitations.at(-1);
    check('expire: elicitation message is the card', seen.message, card(file));
    check('expire: isError', result.isError, true);
    check('expire: state', result.structuredContent.state, 'approval_expired');
    check('expire: approval', result.structuredContent.approval, 'expired');
    // Not before the deadline, and without waiting for the late answer.
    checkThat('expire: result after the 1.5 s deadline, before the answer', elapsed >= 1500 && elapsed < 3000, ms(elapsed));
    check('expire: the server cancelled the elicitation (notifications/cancelled)', seen.aborted, true);
    measured('expire: card shown to cancellation received', ms(seen.abortedAt - seen.at));
    await until('the late answer', () => lateAnswer);
    await sleep(200);
    check('expire: file absent after the late accept', fs.existsSync(file), false);
}

// Invalid arguments: refused before dispatch, no card shown.
{
    const before = elicitations.length;
    const result = await client.callTool({ name: 'touch', arguments: { path: '/etc/passwd', mode: 1 } });
    expected.push('failed_before_dispatch');
    check('invalid: isError', result.isError, true);
    check('invalid: state', result.structuredContent.state, 'failed_before_dispatch');
    check(
        'invalid: failure',
        result.structuredContent.failure,
        'invalid arguments for tool touch: mode: unknown parameter (known: path); ' +
            'path: "/etc/passwd" does not match ^/tmp/[A-Za-z0-9_./-]+$',
    );
    check('invalid: no elicitation', elicitations.length - before, 0);
    check('invalid: pid (nothing spawned)', result.structuredContent.pid, null);

    const below = await client.callTool({ name: 'flood', arguments: { bytes: -1 } });
    expected.push('failed_before_dispatch');
    check('invalid: flood -1 state', below.structuredContent.state, 'failed_before_dispatch');
    check('invalid: flood -1 failure', below.structuredContent.failure, 'invalid arguments for tool flood: bytes: -1 is below the minimum 0');
}

// A cancel mid-call: the AbortSignal makes the SDK send notifications/cancelled.
{
    const pidfile = path.join(dir, 'cancel.pid');
    const abort = new AbortController();
    const call = client.callTool({ name: 'sleep', arguments: { pidfile, seconds: 30 } }, undefined, { signal: abort.signal });
    const rejected = call.then(
        () => 'resolved',
        (error) => error,
    );
    const pid = await waitPid(pidfile);
    cancelledId = main.server.sent.findLast((m) => m.tool === 'sleep').id;
    checkThat('cancel: helper running', alive(pid), `pid ${pid}`);
    const t0 = performance.now();
    abort.abort('the test cancels the call');
    const error = await rejected;
    check('cancel: callTool rejects with the abort reason', String(error?.message ?? error), 'MCP error -32001: the test cancels the call');
    expected.push('cancelled_after_dispatch');
    const row = await until('the final record of the cancelled call', () => {
        const r = activity(log1).find((row) => row.action === 'sleep');
        return r?.finished ? r : undefined;
    });
    const recorded = performance.now() - t0;
    check('cancel: state in the audit log', row.state, 'cancelled_after_dispatch');
    check('cancel: exit_signal (TERM)', row.exit_signal, 15);
    check('cancel: helper gone (kill(pid, 0) fails)', alive(pid), false);
    measured('cancel: abort to final record in the log', ms(recorded));
}

// A client without the elicitation capability cannot approve: refused.
{
    const bare = await connect('bare', { elicitation: false });
    const file = path.join(dir, 'bare');
    const result = await bare.client.callTool({ name: 'touch', arguments: { path: file } });
    check('no elicitation capability: state', result.structuredContent.state, 'failed_before_dispatch');
    check(
        'no elicitation capability: failure',
        result.structuredContent.failure,
        'approval required, but the client did not declare the elicitation capability: ' +
            'no approval card can be shown, so the call is refused',
    );
    check('no elicitation capability: file absent', fs.existsSync(file), false);
    await bare.client.close();
    check('no elicitation capability: server exit status', await exitStatus(bare.server), 0);
}

// Time from tools/call to the card, quiet and during a 1 GiB flood.
async function cardLatency(label, during) {
    const samples = [];
    answer = async () => ({ action: 'decline' });
    for (let i = 0; i < LATENCY_ROUNDS; i++) {
        during?.ensure();
        const before = elicitations.length;
        const t0 = performance.now();
        const result = await client.callTool({ name: 'touch', arguments: { path: path.join(dir, `latency-${label.replace(/[^A-Za-z0-9]+/g, '-')}-${i}`) } });
        expected.push('denied');
        if (result.structuredContent.state !== 'denied') fail(`${label} round ${i}: ${show(result.structuredContent)}`);
        if (elicitations.length !== before + 1) fail(`${label} round ${i}: ${elicitations.length - before} elicitations`);
        samples.push(elicitations.at(-1).at - t0);
        during?.sample();
    }
    measured(
        `card latency ${label} (${LATENCY_ROUNDS} rounds)`,
        `median ${ms(percentile(samples, 50))}, p90 ${ms(percentile(samples, 90))}, max ${ms(Math.max(...samples))}`,
    );
    return samples;
}
await cardLatency('quiet');
{
    // Keeps a 1 GiB flood running: a new one starts whenever the last ended.
    const floods = [];
    let running = null;
    let overlapped = 0;
    const during = {
        ensure() {
            if (running === null) {
                const call = client.callTool({ name: 'flood', arguments: { bytes: BIG_FLOOD_BYTES } }, undefined, LONG);
                const entry = { call, done: false, t0: performance.now() };
                call.finally(() => {
                    entry.done = true;
                    entry.elapsed = performance.now() - entry.t0;
                    if (running === entry) running = null;
                });
                floods.push(entry);
                expected.push('completed');
                running = entry;
            }
        },
        sample() {
            if (running !== null) overlapped += 1;
        },
    };
    // Let the first flood get going before the first round.
    during.ensure();
    await sleep(50);
    await cardLatency('during a 1 GiB flood', during);
    const results = await Promise.all(floods.map((f) => f.call));
    for (const [i, r] of results.entries()) {
        check(`1 GiB flood ${i + 1}: state`, r.structuredContent.state, 'completed');
        check(`1 GiB flood ${i + 1}: stderr_bytes_seen`, r.structuredContent.stderr_bytes_seen, BIG_FLOOD_BYTES);
        check(`1 GiB flood ${i + 1}: result`, r.structuredContent.result, { ok: true, bytes: BIG_FLOOD_BYTES });
        measured(`1 GiB flood ${i + 1}: call time`, ms(floods[i].elapsed));
    }
    measured('rounds that ended with a flood still running', `${overlapped} of ${LATENCY_ROUNDS} (${floods.length} flood call(s))`);
}

// The end of stdin: the server writes every record and exits 0.
{
    await client.close();
    check('main: server exit status', await exitStatus(main.server), 0);
    const rows = activity(log1);
    check('main: states of every call in the audit log, in order', rows.map((r) => r.state), expected);
    check('main: every call finished', rows.every((r) => r.finished), true);
    const verdict = verify(log1);
    check('main: audit verify (no anchor kept)', [verdict.verdict, verdict.status], ['unanchored', 3]);
    measured('main: audit records', verdict.records);
    const sess = sessions(log1);
    check('main: one session', sess.length, 1);
    measured('main: session', show(sess[0]));
}

// Byte-level check of everything the server wrote on stdout.
{
    const bytes = fs.readFileSync(tap);
    const text = bytes.toString('utf8');
    check('stdout: ends with a newline', text.endsWith('\n'), true);
    const lines = text.split('\n').slice(0, -1);
    let requests = 0;
    const responses = [];
    let notifications = 0;
    lines.forEach((line, i) => {
        let message;
        try {
            message = JSON.parse(line);
        } catch (error) {
            fail(`stdout line ${i + 1} is not JSON (${error.message}): ${show(line)}`);
        }
        if (message === null || typeof message !== 'object' || Array.isArray(message)) {
            fail(`stdout line ${i + 1} is not a JSON object: ${show(line)}`);
        }
        if (message.jsonrpc !== '2.0') fail(`stdout line ${i + 1} has no "jsonrpc":"2.0": ${show(line)}`);
        const hasId = 'id' in message;
        const hasMethod = typeof message.method === 'string';
        if (!hasId && !hasMethod) fail(`stdout line ${i + 1} has neither an id nor a method: ${show(line)}`);
        if (message.result?.protocolVersion !== undefined) {
            measured('stdout: protocol version the server answered initialize with', message.result.protocolVersion);
        }
        if (hasId && hasMethod) requests += 1;
        else if (hasId) responses.push(message.id);
        else notifications += 1;
    });
    check(
        'stdout: the 64 MiB flood result is among the lines',
        lines.filter((l) => l.includes(`"stderr_bytes_seen":${FLOOD_BYTES}`)).length,
        1,
    );
    check('stdout: the leak tools\' token appears nowhere', bytes.includes(SECRET), false);
    check('main: the leak tools\' token is not in the audit log', fs.readFileSync(log1).includes(SECRET), false);
    checkThat(
        'stdout: every line is a JSON-RPC 2.0 message',
        true,
        `${lines.length} lines, ${bytes.length} bytes (${requests} requests, ${responses.length} responses, ${notifications} notifications)`,
    );
    // One response per request of the client, but none for the cancelled
    // tools/call (a receiver of notifications/cancelled should not answer).
    const answered = main.server.sent.map((m) => m.id).filter((id) => id !== cancelledId);
    check('stdout: one response per client request, none for the cancelled call', [...responses].sort((a, b) => a - b), answered);
    measured('client-side errors on the main connection', show(main.server.clientErrors ?? []));
}

// ---------------------------------------------------------------------------
// JSON-RPC corners through the SDK: a tools/call whose params are not a
// tool call, and a duplicate id beside the first call's own answer.

{
    const wire = await connect('wire', {});
    for (const [label, params, message] of [
        ['without a name', { arguments: {} }, "MCP error -32602: Invalid params: tools/call needs params.name, the tool's name"],
        ['with arguments that are not an object', { name: 'sleep', arguments: [1] }, 'MCP error -32602: Invalid params: tools/call: params.arguments must be an object'],
    ]) {
        const error = await wire.client.request({ method: 'tools/call', params }, CallToolResultSchema).then(
            () => fail(`tools/call ${label}: answered as a result`),
            (e) => e,
        );
        check(`JSON-RPC: tools/call ${label}: code and message`, [error.code, error.message], [-32602, message]);
    }
    // Two requests under one id, sent on the SDK's transport: the second
    // gets an error of its own, the first its result.
    const answers = [];
    const deliver = wire.transport.onmessage;
    wire.transport.onmessage = (message, extra) => {
        if (message.id === 'dup') answers.push(message);
        else deliver(message, extra);
    };
    const pidfile = path.join(dir, 'dup.pid');
    await wire.transport.send({ jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'sleep', arguments: { pidfile, seconds: 1 } } });
    await wire.transport.send({ jsonrpc: '2.0', id: 'dup', method: 'ping' });
    await until('both answers to id "dup"', () => (answers.length === 2 ? true : undefined));
    check('JSON-RPC: duplicate id: the second request\'s error first', [answers[0].error?.code, answers[0].error?.message],
        [-32600, 'Invalid Request: a request with id "dup" is still in flight (an id is unique among the requests not yet answered); the first one goes on']);
    check('JSON-RPC: duplicate id: then the first call\'s result', answers[1].result?.structuredContent?.state, 'completed');
    await wire.client.close();
}

// ---------------------------------------------------------------------------
// Server 2: a disconnect mid-call under --on-disconnect cancel: two running
// helpers and a card nobody answers

{
    const log2 = path.join(dir, 'disconnect.log');
    const gone = await connect('disconnect', { extra: ['--audit', log2, '--on-disconnect', 'cancel'] });
    const pids = [];
    const calls = [];
    for (const name of ['a', 'b']) {
        const pidfile = path.join(dir, `disconnect-${name}.pid`);
        const call = gone.client.callTool({ name: 'sleep', arguments: { pidfile, seconds: 30 } });
        calls.push(call.then(() => 'resolved', () => 'rejected'));
        pids.push(await waitPid(pidfile));
    }
    // And a card nobody answers.
    onElicit(gone.client);
    answer = () => new Promise(() => {});
    const before = elicitations.length;
    const pending = gone.client.callTool({ name: 'touch', arguments: { path: path.join(dir, 'disconnect-card') } });
    calls.push(pending.then(() => 'resolved', () => 'rejected'));
    await until('the card on the disconnecting client', () => (elicitations.length > before ? true : undefined));
    checkThat('disconnect: helpers running', pids.every(alive), `pids ${pids.join(', ')}`);
    const t0 = performance.now();
    await gone.client.close();
    const status = await exitStatus(gone.server);
    const exited = performance.now() - t0;
    check('disconnect: server exit status', status, 0);
    check('disconnect: pending calls rejected on the client', await Promise.all(calls), ['rejected', 'rejected', 'rejected']);
    const rows = activity(log2);
    check('disconnect: calls in the audit log', rows.map((r) => r.action), ['sleep', 'sleep', 'touch']);
    check('disconnect: every final record written', rows.map((r) => r.finished), [true, true, true]);
    check('disconnect: states', rows.map((r) => r.state), ['cancelled_after_dispatch', 'cancelled_after_dispatch', 'cancelled_before_dispatch']);
    check('disconnect: exit signals (TERM; none for the card)', rows.map((r) => r.exit_signal), [15, 15, null]);
    check('disconnect: file of the unanswered card absent', fs.existsSync(path.join(dir, 'disconnect-card')), false);
    check('disconnect: no helper alive', pids.map(alive), [false, false]);
    const verdict = verify(log2);
    check('disconnect: audit verify (no anchor kept)', [verdict.verdict, verdict.status], ['unanchored', 3]);
    measured('disconnect: close to server exit', ms(exited));
}

measured('checks passed', checks);
measured('total time', ms(performance.now() - started));
if (!process.env.SG_KEEP) fs.rmSync(dir, { recursive: true, force: true });
process.exit(0);
