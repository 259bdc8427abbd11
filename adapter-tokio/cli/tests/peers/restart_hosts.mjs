// `spillguard stdio --mcp --restart on-failure` under Node-based hosts
// (socketpairs for stdio), in front of tests/peers/crashy_server.py:
//
//     node tests/peers/restart_hosts.mjs PATH/TO/spillguard
//
// * the official TypeScript SDK client: the server crashes on its third
//   `tools/call`; that call is answered with the crash error within 1 s,
//   the fourth by a new server without the client doing anything, the
//   new server was given the client's `initialize`, and the client got
//   `notifications/tools/list_changed`;
// * Claude Code's health check (`claude mcp list`, fresh HOME, no
//   account) of a server whose first start fails: through the guard it
//   is back and Connected, started again by the guard (one guard, one
//   restart in its record);
// * a scripted Claude Code session (`claude -p`, its model answered by a
//   stand-in for the Messages API on 127.0.0.1 that asks for the
//   server's tool four times): the third call gets the crash error, the
//   fourth is answered by the new server, in the same session.
//
// Prints each fact; the first wrong one ends the run with exit status 1.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

if (process.argv.length !== 3) {
    console.error('usage: node tests/peers/restart_hosts.mjs PATH/TO/spillguard');
    process.exit(2);
}
const spillguard = path.resolve(process.argv[2]);
const here = path.dirname(fileURLToPath(import.meta.url));
const peers = path.resolve(process.env.SPILLGUARD_PEERS ?? path.join(here, '../../../../target/peers'));
const npm = path.join(peers, 'npm/node_modules');
const sdk = (file) => import(pathToFileURL(path.join(npm, '@modelcontextprotocol/sdk/dist/esm', file)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = await sdk('client/stdio.js');
const python = path.join(peers, 'venv/bin/python');
const crashy = path.join(here, 'crashy_server.py');
const claude = path.join(npm, '.bin/claude');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'spillguard-restart-hosts-'));

function check(label, actual, expected) {
    try {
        assert.deepStrictEqual(actual, expected);
    } catch {
        fail(`${label}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
    }
    console.log(`ok   ${label}: ${JSON.stringify(actual)}`);
}
function checkThat(label, condition, detail) {
    if (!condition) fail(`${label} (${detail})`);
    console.log(`ok   ${label} (${detail})`);
}
function fail(message) {
    console.error(`FAIL ${message}`);
    process.exit(1);
}

/** The server's log: each run's pid and what it read, in order. */
function runs(log) {
    const byPid = new Map();
    for (const line of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
        const [pid, what] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
        if (!byPid.has(pid)) byPid.set(pid, []);
        byPid.get(pid).push(what);
    }
    return byPid;
}

// -------------------------------------------------------------------------
// 1. The TypeScript SDK client.

{
    const state = path.join(scratch, 'state.json');
    const log = path.join(scratch, 'server.log');
    const transport = new StdioClientTransport({
        command: spillguard,
        args: ['stdio', '--mcp', '--restart', 'on-failure', '--', python, crashy, state, log],
        env: getDefaultEnvironment(),
        stderr: 'pipe',
    });
    const client = new Client({ name: 'spillguard-restart', version: '1.0.0' });
    const notifications = [];
    client.fallbackNotificationHandler = async (notification) => {
        notifications.push(notification.method);
    };
    await client.connect(transport);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    check('TS SDK: tools/list', tools, ['count']);
    const first = (await client.callTool({ name: 'count', arguments: {} })).content[0].text;
    const second = (await client.callTool({ name: 'count', arguments: {} })).content[0].text;
    checkThat('TS SDK: calls 1 and 2 answered', first.startsWith('call 1 by ') && second.startsWith('call 2 by '), `${first}, ${second}`);
    const started = performance.now();
    const third = await client.callTool({ name: 'count', arguments: {} }).then(
        (result) => ({ result }),
        (error) => ({ error }),
    );
    const elapsed = performance.now() - started;
    checkThat('TS SDK: the third call gets the crash error',
        third.error && /exited with status 3/.test(third.error.message) && /restarting \(attempt 2 of 5\)/.test(third.error.message),
        third.error ? third.error.message : JSON.stringify(third.result));
    checkThat('TS SDK: within 1 s of the call', elapsed < 1000, `${elapsed.toFixed(1)} ms`);
    const fourth = (await client.callTool({ name: 'count', arguments: {} })).content[0].text;
    const [firstPid, fourthPid] = [first.split(' ').pop(), fourth.split(' ').pop()];
    checkThat('TS SDK: the fourth call answered by a new server', fourth.startsWith('call 4 by ') && fourthPid !== firstPid,
        `${fourth}, first run ${firstPid}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    checkThat('TS SDK: the client got tools/list_changed', notifications.includes('notifications/tools/list_changed'),
        JSON.stringify(notifications));
    await client.close();
    const byPid = runs(log);
    check('TS SDK: two server runs', byPid.size, 2);
    check('TS SDK: the new server was given initialize, then initialized',
        byPid.get(fourthPid).slice(0, 3), ['start', 'initialize', 'notifications/initialized']);
}

// -------------------------------------------------------------------------
// 2. Claude Code's health check, of a server whose first start fails.

{
    const home = fs.mkdtempSync(path.join(scratch, 'home-'));
    const project = fs.mkdtempSync(path.join(scratch, 'project-'));
    const env = { ...process.env, HOME: home, CLAUDE_CONFIG_DIR: path.join(home, '.claude'), DISABLE_AUTOUPDATER: '1' };
    const run = (args) => spawnSync(claude, args, { cwd: project, env, encoding: 'utf8', timeout: 120_000 });
    const state = (name) => path.join(scratch, `${name}.state.json`);
    const log = (name) => path.join(scratch, `${name}.log`);
    for (const [name, command] of [
        ['plain', [python, crashy, state('plain'), log('plain'), '--fail-first-start']],
        ['guarded', [spillguard, 'stdio', '--mcp', '--restart', 'on-failure', '--record', path.join(scratch, 'claude.record.jsonl'), '--',
            python, crashy, state('guarded'), log('guarded'), '--fail-first-start']],
    ]) {
        check(`claude mcp add ${name}: exit status`, run(['mcp', 'add', name, '--', ...command]).status, 0);
    }
    const listed = run(['mcp', 'list']);
    check('claude mcp list: exit status', listed.status, 0);
    const line = (name) => listed.stdout.split('\n').find((l) => l.startsWith(`${name}:`)) ?? '';
    // Claude Code starts a server that failed once more itself: the
    // control's line is shown, not checked.
    console.log(`     control: ${line('plain')}; its runs: ${runs(log('plain')).size}`);
    checkThat('claude mcp list: guarded, the server is back and Connected', line('guarded').includes('✔ Connected'), line('guarded'));
    const guardedRuns = runs(log('guarded'));
    check('claude mcp list: the guard started the server twice', guardedRuns.size, 2);
    const records = fs.readFileSync(path.join(scratch, 'claude.record.jsonl'), 'utf8').trim().split('\n').map(JSON.parse);
    check('claude mcp list: one guard, a record per run: the first, then the one restarted after exit status 1',
        records.map((r) => [r.restarts, r.restart_reason, r.crash_loop]), [[0, null, false], [1, 'exit status 1', false]]);
    checkThat('claude mcp list: the second run was initialized',
        [...guardedRuns.values()][1].includes('initialize'), JSON.stringify([...guardedRuns.values()]));
}

// -------------------------------------------------------------------------
// 3. A scripted Claude Code session: the model is a stand-in for the
// Messages API on 127.0.0.1 that asks for the `count` tool four times,
// then ends the turn; every tool result Claude Code sends back is kept.

async function scriptedSession(name, guarded) {
    const home = fs.mkdtempSync(path.join(scratch, 'home-'));
    const project = fs.mkdtempSync(path.join(scratch, 'project-'));
    const state = path.join(scratch, `${name}.session.state.json`);
    const log = path.join(scratch, `${name}.session.log`);
    const record = path.join(scratch, `${name}.session.record.jsonl`);
    const tool = 'mcp__crashy__count';
    const results = [];
    let asked = 0;
    const stream = (res, model, blocks, stopReason) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = (name, data) => res.write(`event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`);
        event('message_start', { message: { id: `msg_${asked}`, type: 'message', role: 'assistant', model, content: [],
            stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
        blocks.forEach((block, index) => {
            if (block.type === 'tool_use') {
                event('content_block_start', { index, content_block: { ...block, input: {} } });
                event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: '{}' } });
            } else {
                event('content_block_start', { index, content_block: { type: 'text', text: '' } });
                event('content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
            }
            event('content_block_stop', { index });
        });
        event('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 1 } });
        event('message_stop', {});
        res.end();
    };
    const model = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk) => { body += chunk; });
        req.on('end', () => {
            const request = body ? JSON.parse(body) : {};
            if (!req.url.startsWith('/v1/messages') || req.url.includes('count_tokens')) {
                res.writeHead(200, { 'content-type': 'application/json' });
                res.end(JSON.stringify({ input_tokens: 1 }));
                return;
            }
            const offersTool = (request.tools ?? []).some((t) => t.name === tool);
            if (offersTool) {
                const last = request.messages.at(-1);
                for (const block of Array.isArray(last.content) ? last.content : []) {
                    if (block.type === 'tool_result') {
                        const text = typeof block.content === 'string' ? block.content
                            : (block.content ?? []).map((c) => c.text ?? '').join('');
                        results.push({ id: block.tool_use_id, text, error: !!block.is_error });
                    }
                }
            }
            if (offersTool && asked < 4) {
                asked += 1;
                stream(res, request.model, [{ type: 'tool_use', id: `toolu_${asked}`, name: tool }], 'tool_use');
            } else {
                stream(res, request.model, [{ type: 'text', text: 'done' }], 'end_turn');
            }
        });
    });
    await new Promise((resolve) => model.listen(0, '127.0.0.1', resolve));
    const env = {
        ...process.env, HOME: home, CLAUDE_CONFIG_DIR: path.join(home, '.claude'), DISABLE_AUTOUPDATER: '1',
        ANTHROPIC_BASE_URL: `http://127.0.0.1:${model.address().port}`, ANTHROPIC_API_KEY: 'sk-ant-local-stand-in',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        // The server's tools in the request itself, not behind a search.
        ENABLE_TOOL_SEARCH: 'false',
    };
    const server = guarded
        ? { command: spillguard, args: ['stdio', '--mcp', '--restart', 'on-failure', '--record', record, '--', python, crashy, state, log] }
        : { command: python, args: [crashy, state, log] };
    const config = { mcpServers: { crashy: server } };
    const session = spawn(claude, ['-p', 'Count four times with the count tool.', '--output-format', 'json',
        '--mcp-config', JSON.stringify(config), '--strict-mcp-config', '--allowedTools', tool],
    { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    session.stdout.on('data', (chunk) => { out += chunk; });
    session.stderr.on('data', (chunk) => { err += chunk; });
    const status = await new Promise((resolve) => {
        const timer = setTimeout(() => session.kill('SIGKILL'), 120_000);
        session.on('close', (code) => { clearTimeout(timer); resolve(code); });
    });
    model.close();
    if (!guarded) {
        return { status, results, runs: runs(log).size };
    }
    check('claude -p: exit status', status, 0);
    const result = JSON.parse(out.trim().split('\n').at(-1) || '{}').result;
    checkThat('claude -p: the session ended its turn', result === 'done', `result ${JSON.stringify(result)}; ${err.slice(-500)}`);
    check('claude -p: four tool results came back', results.map((r) => r.id), ['toolu_1', 'toolu_2', 'toolu_3', 'toolu_4']);
    const [first, second, third, fourth] = results;
    checkThat('claude -p: calls 1 and 2 answered by the first server',
        first.text.startsWith('call 1 by ') && second.text.startsWith('call 2 by ') && !first.error, `${first.text}, ${second.text}`);
    checkThat('claude -p: the third call got the crash error',
        third.error && /exited with status 3/.test(third.text) && /restarting \(attempt 2 of 5\)/.test(third.text), third.text);
    const [firstPid, fourthPid] = [first.text.split(' ').pop(), fourth.text.split(' ').pop()];
    checkThat('claude -p: the fourth call answered by the new server in the same session',
        fourth.text.startsWith('call 4 by ') && !fourth.error && fourthPid !== firstPid, `${fourth.text}, first run ${firstPid}`);
    const byPid = runs(log);
    check('claude -p: two server runs', byPid.size, 2);
    check('claude -p: the new server was given initialize, then initialized',
        byPid.get(fourthPid).slice(0, 3), ['start', 'initialize', 'notifications/initialized']);
    const lines = fs.readFileSync(record, 'utf8').trim().split('\n').map(JSON.parse);
    check('claude -p: a record per run, the second after exit status 3',
        lines.map((r) => [r.restarts, r.restart_reason]), [[0, null], [1, 'exit status 3']]);
    return { status, results, runs: byPid.size };
}

{
    const control = await scriptedSession('plain', false);
    console.log(`     control, no guard: exit ${control.status}; tool results: ${JSON.stringify(control.results.map((r) => (r.error ? 'error: ' : '') + r.text))}; server runs: ${control.runs}`);
    await scriptedSession('guarded', true);
}
