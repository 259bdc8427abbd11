// The npm channel, installed: `npx spillguard` from a fresh prefix where
// the two tarballs of .ci/dist.sh were installed offline, driven by the
// official TypeScript SDK client; and the launcher on a platform it has no
// binary for, without its platform package, and with a broken binary: one
// line, exit status 1, never a stack trace.
//
//     node tests/peers/npm_channel.mjs PREFIX TOOLS_FILE VERSION
//
// The SDK is loaded from $SPILLGUARD_PEERS/npm. Exits non-zero at the first
// wrong fact.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [prefix, toolsFile, version] = process.argv.slice(2).map((a, i) => (i < 2 ? path.resolve(a) : a));
const here = path.dirname(fileURLToPath(import.meta.url));
const peers = path.resolve(process.env.SPILLGUARD_PEERS ?? path.join(here, '../../../../target/peers'));
const sdk = (file) => import(pathToFileURL(path.join(peers, 'npm/node_modules/@modelcontextprotocol/sdk/dist/esm', file)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = await sdk('client/stdio.js');

let checks = 0;
function check(label, actual, expected) {
    try {
        assert.deepStrictEqual(actual, expected);
    } catch {
        console.error(`FAIL ${label}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
        process.exit(1);
    }
    checks += 1;
    console.log(`ok   ${label}: ${JSON.stringify(actual)}`);
}

// 1. `npx spillguard --version`, offline.
{
    const run = spawnSync('npx', ['--offline', 'spillguard', '--version'], { cwd: prefix, encoding: 'utf8' });
    check('npx spillguard --version', [run.status, run.stdout], [0, `spillguard ${version}\n`]);
}

// 2. The TypeScript SDK client drives `npx spillguard mcp --tools FILE`.
{
    const transport = new StdioClientTransport({
        command: 'npx',
        args: ['--offline', 'spillguard', 'mcp', '--tools', toolsFile],
        cwd: prefix,
        env: getDefaultEnvironment(),
        stderr: 'ignore',
    });
    const client = new Client({ name: 'spillguard-npm-channel', version: '1.0.0' });
    await client.connect(transport);
    const names = (await client.listTools()).tools.map((t) => t.name);
    check('TS SDK through npx: tools', names.includes('flood'), true);
    const result = await client.callTool({ name: 'flood', arguments: { bytes: 100000 } });
    const s = result.structuredContent;
    check('TS SDK through npx: flood state and counts', [s.state, s.stderr_bytes_seen, s.stderr_truncated], ['completed', 100000, true]);
    check('TS SDK through npx: the text is the result', JSON.parse(result.content[0].text), { ok: true, bytes: 100000 });
    await client.close();
}

// 3. The launcher's bad cases: one line on stderr, exit status 1.
const launcher = path.join(prefix, 'node_modules/spillguard/bin/spillguard.js');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'spillguard-npm-'));
function launch(label, script, { preload } = {}) {
    const args = preload ? ['-r', preload, script, '--version'] : [script, '--version'];
    const run = spawnSync(process.execPath, args, { encoding: 'utf8' });
    const lines = run.stderr.split('\n').filter((l) => l !== '');
    check(`${label}: exit status, nothing on stdout, one line on stderr`, [run.status, run.stdout, lines.length], [1, '', 1]);
    return lines[0];
}
const ALTERNATIVES = 'install it with `pipx install spillguard` (or `uvx spillguard`) or `cargo install spillguard-cli`';
{
    const fake = path.join(scratch, 'darwin-arm64.cjs');
    fs.writeFileSync(fake, "Object.defineProperty(process, 'platform', { value: 'darwin' });\nObject.defineProperty(process, 'arch', { value: 'arm64' });\n");
    check('a platform without a binary', launch('darwin-arm64', launcher, { preload: fake }),
        `spillguard: no binary for darwin-arm64 in the npm package (it has linux-x64); ${ALTERNATIVES}`);
}
{
    // Only the launcher's package: its platform package is missing.
    const alone = path.join(scratch, 'alone/node_modules/spillguard');
    fs.cpSync(path.join(prefix, 'node_modules/spillguard'), alone, { recursive: true });
    check('a missing platform package', launch('missing', path.join(alone, 'bin/spillguard.js')),
        'spillguard: @spillguard/linux-x64, the binary for linux-x64, is not installed (npm skips optional dependencies with --no-optional or --omit=optional); '
        + `reinstall spillguard, or ${ALTERNATIVES}`);
}
for (const [label, mode, content, expected] of [
    ['a binary that is not executable', 0o644, '#!/bin/sh\n', (binary) => `spillguard: the binary ${binary} of @spillguard/linux-x64 cannot be run (EACCES); reinstall spillguard, or ${ALTERNATIVES}`],
    ['a binary that is not a program', 0o755, 'not a program\n', (binary) => `spillguard: the binary ${binary} of @spillguard/linux-x64 is damaged (not an ELF program); reinstall spillguard, or ${ALTERNATIVES}`],
    ['an empty binary', 0o755, '', (binary) => `spillguard: the binary ${binary} of @spillguard/linux-x64 is damaged (not an ELF program); reinstall spillguard, or ${ALTERNATIVES}`],
]) {
    const copy = path.join(scratch, label.replaceAll(' ', '-'), 'node_modules');
    fs.cpSync(path.join(prefix, 'node_modules/spillguard'), path.join(copy, 'spillguard'), { recursive: true });
    fs.cpSync(path.join(prefix, 'node_modules/@spillguard'), path.join(copy, '@spillguard'), { recursive: true });
    const binary = path.join(copy, '@spillguard/linux-x64/bin/spillguard');
    fs.writeFileSync(binary, content);
    fs.chmodSync(binary, mode);
    check(label, launch(label, path.join(copy, 'spillguard/bin/spillguard.js')), expected(binary));
}
fs.rmSync(scratch, { recursive: true, force: true });
console.log(`npm_channel.mjs: ${checks} checks passed`);
