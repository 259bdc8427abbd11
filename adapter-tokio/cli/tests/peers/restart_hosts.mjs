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
//   restart in its record).
//
// Prints each fact; the first wrong one ends the run with exit status 1.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
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
