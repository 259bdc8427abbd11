// `spillguard stdio` under the Node-based hosts that hand their children
// socketpairs for stdio, each beside a control row without spillguard in
// the same run (the peers are installed by .ci/peers.sh into
// target/peers).
//
//     node tests/peers/stdio_hosts.mjs PATH/TO/spillguard PATH/TO/mcp_tools.toml
//
// What it checks, printing each fact; the first wrong one ends the run
// with exit status 1:
//
// * a plain `child_process.spawn` with `stdio: 'pipe'` (socketpairs): one
//   request through `spillguard stdio -- cat` comes back, as through `cat`;
// * the official TypeScript SDK client (`StdioClientTransport`) through
//   `spillguard stdio --mcp` to `mcp-server-time` (PyPI) and to
//   `@modelcontextprotocol/server-everything` (npm): initialize, list
//   tools, call one, close; the record is written, `completed`, nothing
//   diverted, every byte counted; with `--otel-file`, each request is an
//   MCP span, the call under the `traceparent` the client put in `_meta`;
// * the same client to a server that writes a Python traceback and exits
//   1 during `initialize`: through the guard, the error for `initialize`
//   carries the exit status and the traceback's last line within a second;
//   without it, only "Connection closed";
// * Claude Code's own health check (`claude mcp add`, `claude mcp list`,
//   with a fresh HOME and no account): the guarded server is Connected, as
//   the plain one is;
// * the MCP Inspector's CLI mode (`--cli ... --method tools/list` and
//   `tools/call`) through `spillguard stdio --mcp` and through
//   `spillguard mcp --tools`, beside the plain server.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

if (process.argv.length !== 4) {
    console.error('usage: node tests/peers/stdio_hosts.mjs PATH/TO/spillguard PATH/TO/mcp_tools.toml');
    process.exit(2);
}
const spillguard = path.resolve(process.argv[2]);
const toolsFile = path.resolve(process.argv[3]);
const here = path.dirname(fileURLToPath(import.meta.url));
const peers = path.resolve(process.env.SPILLGUARD_PEERS ?? path.join(here, '../../../../target/peers'));
const npm = path.join(peers, 'npm/node_modules');
const sdk = (file) => import(pathToFileURL(path.join(npm, '@modelcontextprotocol/sdk/dist/esm', file)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = await sdk('client/stdio.js');

const timeServer = [path.join(peers, 'venv/bin/mcp-server-time'), '--local-timezone', 'UTC'];
const everything = ['node', path.join(npm, '@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'];
const claude = path.join(npm, '.bin/claude');
const inspector = path.join(npm, '.bin/mcp-inspector');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'spillguard-hosts-'));

let checks = 0;
function check(label, actual, expected) {
    try {
        assert.deepStrictEqual(actual, expected);
    } catch {
        fail(`${label}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
    }
    checks += 1;
    console.log(`ok   ${label}: ${JSON.stringify(actual)}`);
}
function checkThat(label, condition, detail) {
    if (!condition) fail(`${label} (${detail})`);
    checks += 1;
    console.log(`ok   ${label} (${detail})`);
}
function fail(message) {
    console.error(`FAIL ${message}`);
    process.exit(1);
}
const ms = (t) => `${t.toFixed(1)} ms`;

/**
 * The record the guard wrote: it writes it as it exits, which may be just
 * after the client saw its answers, so a complete line is waited for
 * (at most 5 s).
 */
async function readRecord(file) {
    const deadline = performance.now() + 5000;
    let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    while (!text.endsWith('\n') && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    }
    const lines = text.trim().split('\n');
    check(`${path.basename(file)}: one record line`, lines.length, 1);
    return JSON.parse(lines[0]);
}

/** A line written to `command` comes back, in how long (socketpairs). */
async function echoOnce(command, args) {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'ignore'] });
    const line = '{"jsonrpc":"2.0","id":1,"method":"ping"}\n';
    const started = performance.now();
    child.stdin.write(line);
    const echoed = await new Promise((resolve, reject) => {
        let got = '';
        const timer = setTimeout(() => reject(new Error('no answer within 5 s')), 5000);
        child.stdout.on('data', (chunk) => {
            got += chunk;
            if (got.length >= line.length) {
                clearTimeout(timer);
                resolve(got);
            }
        });
    }).catch((error) => error.message);
    const elapsed = performance.now() - started;
    child.stdin.end();
    const code = await new Promise((resolve) => child.on('close', resolve));
    return { echoed: echoed === line, code, elapsed };
}

// -------------------------------------------------------------------------
// 1. child_process with socketpairs.

{
    const plain = await echoOnce('cat', []);
    const guarded = await echoOnce(spillguard, ['stdio', '--', 'cat']);
    check('node spawn, control (cat): echoed and exit 0', [plain.echoed, plain.code], [true, 0]);
    check('node spawn, spillguard stdio -- cat: echoed and exit 0', [guarded.echoed, guarded.code], [true, 0]);
    console.log(`     round trip: cat ${ms(plain.elapsed)}, guarded ${ms(guarded.elapsed)}`);
    if (process.getuid() === 0) {
        // The server in a control group of its own (cloned into it) with a
        // process limit, over the same socketpairs.
        const record = path.join(scratch, 'bounded.jsonl');
        const bounded = await echoOnce(spillguard, ['stdio', '--pids-max', '16', '--record', record, '--', 'cat']);
        const line = JSON.parse(fs.readFileSync(record, 'utf8').trim().split('\n').pop());
        check('node spawn, spillguard stdio --pids-max 16 -- cat: echoed, exit 0, completed in its cgroup',
            [bounded.echoed, bounded.code, line.state, line.tree_kill, line.limits.pids_max],
            [true, 0, 'completed', 'cgroup-v2', 16]);
    } else if (process.env.CI) {
        fail('the bounded row needs root in CI');
    } else {
        console.log('skipped: the bounded row needs root');
    }
}

// -------------------------------------------------------------------------
// 2. The TypeScript SDK client, to two real servers.

async function sdkSession(command, args, tool, toolArgs) {
    const transport = new StdioClientTransport({ command, args, env: getDefaultEnvironment(), stderr: 'pipe' });
    const client = new Client({ name: 'spillguard-hosts', version: '1.0.0' });
    const started = performance.now();
    await client.connect(transport);
    const connected = performance.now() - started;
    const tools = (await client.listTools()).tools.map((t) => t.name);
    const result = await client.callTool({ name: tool, arguments: toolArgs });
    await client.close();
    return { tools, result, connected };
}

for (const [name, server, tool, toolArgs, expect] of [
    ['mcp-server-time', timeServer, 'get_current_time', { timezone: 'UTC' }, (r) => JSON.parse(r.content[0].text).timezone === 'UTC'],
    ['server-everything', everything, 'echo', { message: 'hi' }, (r) => r.content[0].text === 'Echo: hi'],
]) {
    const record = path.join(scratch, `${name}.jsonl`);
    const plain = await sdkSession(server[0], server.slice(1), tool, toolArgs);
    const guarded = await sdkSession(
        spillguard,
        ['stdio', '--mcp', '--record', record, '--', ...server],
        tool,
        toolArgs,
    );
    checkThat(`TS SDK, control ${name}: ${tool} answered`, expect(plain.result), JSON.stringify(plain.result.content[0]));
    checkThat(`TS SDK, guarded ${name}: ${tool} answered`, expect(guarded.result), JSON.stringify(guarded.result.content[0]));
    check(`TS SDK, guarded ${name}: the same tools as the control`, guarded.tools, plain.tools);
    const r = await readRecord(record);
    checkThat(`${name} record: ended by the client's close`, ['completed', 'cancelled_after_dispatch'].includes(r.state), `${r.state} ${r.cancel_reason}`);
    check(`${name} record: stdout mode, lines diverted`, [r.stdout_mode, r.stdout_lines_diverted], ['streamed', 0]);
    checkThat(`${name} record: bytes counted each way`, r.stdin_bytes_forwarded > 0 && r.stdout_bytes_forwarded > 0,
        `${r.stdin_bytes_forwarded} in, ${r.stdout_bytes_forwarded} out, ${r.stdin_bytes_undelivered} undelivered`);
    check(`${name} record: nothing undelivered`, r.stdin_bytes_undelivered, 0);
    console.log(`     connect: control ${ms(plain.connected)}, guarded ${ms(guarded.connected)}`);
}

// -------------------------------------------------------------------------
// 2b. The same client with OpenTelemetry on (`--otel-file`): each request
// through the socketpairs Node hands its child is an MCP span, the call
// under the trace context the client put in `_meta`.

{
    const record = path.join(scratch, 'otel.jsonl');
    const otel = path.join(scratch, 'otel.otlp.jsonl');
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const transport = new StdioClientTransport({
        command: spillguard,
        args: ['stdio', '--mcp', '--record', record, '--otel-file', otel, '--', ...everything],
        env: getDefaultEnvironment(),
        stderr: 'pipe',
    });
    const client = new Client({ name: 'spillguard-hosts', version: '1.0.0' });
    await client.connect(transport);
    const result = await client.callTool({
        name: 'echo',
        arguments: { message: 'traced' },
        _meta: { traceparent: `00-${traceId}-${parent}-01` },
    });
    await client.close();
    check('otel: echo answered', result.content[0].text, 'Echo: traced');
    const r = await readRecord(record);
    const spans = fs.readFileSync(otel, 'utf8').trim().split('\n')
        .flatMap((line) => (JSON.parse(line).resourceSpans ?? []).flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)));
    const attr = (span, key) => span.attributes.find((kv) => kv.key === key)?.value.stringValue;
    const named = (name) => spans.filter((s) => s.name === name);
    check('otel: one initialize span, a trace of its own', named('initialize').map((s) => s.parentSpanId), ['']);
    const [call] = named('tools/call echo');
    checkThat('otel: one tools/call echo span', named('tools/call echo').length === 1, spans.map((s) => s.name).join(', '));
    check('otel: the call under the client\'s context', [call.traceId, call.parentSpanId], [traceId, parent]);
    check('otel: the call\'s attributes',
        ['mcp.method.name', 'gen_ai.tool.name', 'network.transport', 'spillguard.call.id', 'mcp.session.id', 'error.type'].map((k) => attr(call, k)),
        ['tools/call', 'echo', 'pipe', r.call_id, r.session_id, undefined]);
    check('otel: the server\'s call span, as the record names it', spans.filter((s) => s.spanId === r.span_id).length, 1);
}

// -------------------------------------------------------------------------
// 3. A server that crashes during initialize.

const crash = path.join(scratch, 'crash.py');
fs.writeFileSync(crash, [
    'import sys, time',
    'sys.stdin.readline()',
    'sys.stderr.write("Traceback (most recent call last):\\n")',
    'sys.stderr.write("  File \\"server.py\\", line 12, in <module>\\n    settings = load()\\n")',
    'sys.stderr.write("KeyError: \'DATABASE_URL\'\\n")',
    'sys.stderr.flush()',
    'sys.exit(1)',
    '',
].join('\n'));

async function connectError(command, args) {
    const transport = new StdioClientTransport({ command, args, env: getDefaultEnvironment(), stderr: 'ignore' });
    const client = new Client({ name: 'spillguard-hosts', version: '1.0.0' });
    const started = performance.now();
    try {
        await client.connect(transport, { timeout: 10_000 });
    } catch (error) {
        const elapsed = performance.now() - started;
        await client.close().catch(() => {});
        return { error, elapsed };
    }
    fail(`${command}: initialize succeeded against a crashing server`);
}

{
    const record = path.join(scratch, 'crash.jsonl');
    const control = await connectError('python3', [crash]);
    const guarded = await connectError(spillguard, ['stdio', '--mcp', '--record', record, '--', 'python3', crash]);
    console.log(`     control: ${control.error.message} after ${ms(control.elapsed)}`);
    check('crash, guarded: error code', guarded.error.code, -32000);
    check('crash, guarded: message', guarded.error.message, 'MCP error -32000: MCP server exited with status 1 before answering');
    const data = guarded.error.data;
    check('crash, guarded: exit status and signal', [data.exit_status, data.exit_signal], [1, null]);
    checkThat('crash, guarded: the traceback\'s last line in the excerpt',
        data.stderr_excerpt.endsWith("KeyError: 'DATABASE_URL'\n"), JSON.stringify(data.stderr_excerpt));
    checkThat('crash, guarded: answered within a second of starting', guarded.elapsed < 1000, ms(guarded.elapsed));
    const r = await readRecord(record);
    check('crash record: state, excerpt, call id in the answer', [r.state, r.stderr_excerpt, r.call_id], ['failed_local', data.stderr_excerpt, data.call_id]);
    check('crash record: stderr bytes seen', data.stderr_bytes_seen, r.stderr_bytes_seen);
    checkThat('crash, control: no reason given', !/DATABASE_URL/.test(control.error.message), control.error.message);
}

// -------------------------------------------------------------------------
// 4. Claude Code's health check.

{
    const home = fs.mkdtempSync(path.join(scratch, 'home-'));
    const project = fs.mkdtempSync(path.join(scratch, 'project-'));
    const env = { ...process.env, HOME: home, CLAUDE_CONFIG_DIR: path.join(home, '.claude'), DISABLE_AUTOUPDATER: '1' };
    const run = (args) => spawnSync(claude, args, { cwd: project, env, encoding: 'utf8', timeout: 120_000 });
    for (const [name, command] of [
        ['plain', timeServer],
        ['guarded', [spillguard, 'stdio', '--mcp', '--', ...timeServer]],
        ['guarded_tools', [spillguard, 'mcp', '--tools', toolsFile]],
    ]) {
        const added = run(['mcp', 'add', name, '--', ...command]);
        check(`claude mcp add ${name}: exit status`, added.status, 0);
    }
    const started = performance.now();
    const listed = run(['mcp', 'list']);
    const elapsed = performance.now() - started;
    check('claude mcp list: exit status', listed.status, 0);
    for (const name of ['plain', 'guarded', 'guarded_tools']) {
        const line = listed.stdout.split('\n').find((l) => l.startsWith(`${name}:`)) ?? '';
        checkThat(`claude mcp list: ${name} is Connected`, line.includes('✔ Connected'), line);
    }
    console.log(`     claude mcp list took ${ms(elapsed)}`);
}

// -------------------------------------------------------------------------
// 5. The MCP Inspector's CLI mode.

function inspect(target, method, extra = []) {
    const started = performance.now();
    const out = spawnSync(inspector, ['--cli', ...target, '--method', method, ...extra], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, HOME: scratch },
    });
    const elapsed = performance.now() - started;
    if (out.status !== 0) fail(`inspector ${method} on ${target.join(' ')}: status ${out.status}\n${out.stdout}\n${out.stderr}`);
    return { value: JSON.parse(out.stdout), elapsed };
}

{
    const timeCall = ['--tool-name', 'get_current_time', '--tool-arg', 'timezone=UTC'];
    const plain = inspect(timeServer, 'tools/call', timeCall);
    const guarded = inspect([spillguard, 'stdio', '--mcp', '--', ...timeServer], 'tools/call', timeCall);
    const zone = (v) => JSON.parse(v.content[0].text).timezone;
    check('inspector, control: tools/call get_current_time', zone(plain.value), 'UTC');
    check('inspector, spillguard stdio: tools/call get_current_time', zone(guarded.value), 'UTC');
    const plainList = inspect(timeServer, 'tools/list').value.tools.map((t) => t.name);
    const guardedList = inspect([spillguard, 'stdio', '--mcp', '--', ...timeServer], 'tools/list').value.tools.map((t) => t.name);
    check('inspector, spillguard stdio: tools/list as the control', guardedList, plainList);

    const bridged = [spillguard, 'mcp', '--tools', toolsFile];
    const list = inspect(bridged, 'tools/list').value.tools.map((t) => t.name);
    checkThat('inspector, spillguard mcp: tools/list has flood', list.includes('flood'), list.join(', '));
    const flood = inspect(bridged, 'tools/call', ['--tool-name', 'flood', '--tool-arg', 'bytes=100000']);
    const structured = flood.value.structuredContent;
    check('inspector, spillguard mcp: flood state and counts', [structured.state, structured.stderr_bytes_seen], ['completed', 100000]);
    console.log(`     inspector tools/call: control ${ms(plain.elapsed)}, guarded ${ms(guarded.elapsed)}, spillguard mcp ${ms(flood.elapsed)}`);
}

fs.rmSync(scratch, { recursive: true, force: true });
console.log(`${checks} checks passed`);
