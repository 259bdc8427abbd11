#!/usr/bin/env node
// The `spillguard` command of the npm package: finds the binary of this
// platform's package (an optional dependency, installed by npm only where
// it runs) and runs it with this process's stdio, arguments and exit
// status. Nothing is downloaded, here or at install time.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** The platform packages this version ships, by `platform-arch`. */
const PACKAGES = {
    'linux-x64': '@spillguard/linux-x64',
};

const ALTERNATIVES =
    'install it with `pipx install spillguard` (or `uvx spillguard`) or `cargo install spillguard-cli`';

function fail(message) {
    process.stderr.write(`spillguard: ${message}\n`);
    process.exit(1);
}

const platform = `${process.platform}-${process.arch}`;
const name = PACKAGES[platform];
if (name === undefined) {
    fail(`no binary for ${platform} in the npm package (it has ${Object.keys(PACKAGES).join(', ')}); ${ALTERNATIVES}`);
}

let binary;
try {
    binary = path.join(path.dirname(require.resolve(`${name}/package.json`)), 'bin', 'spillguard');
} catch {
    fail(`${name}, the binary for ${platform}, is not installed (npm skips optional dependencies with --no-optional or --omit=optional); reinstall spillguard, or ${ALTERNATIVES}`);
}
try {
    fs.accessSync(binary, fs.constants.X_OK);
} catch (error) {
    fail(`the binary ${binary} of ${name} cannot be run (${error.code}); reinstall spillguard, or ${ALTERNATIVES}`);
}
// A damaged file would be handed to /bin/sh by the exec call: check that it
// is a program at all.
const ELF = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);
const head = Buffer.alloc(4);
let got = 0;
try {
    const fd = fs.openSync(binary, 'r');
    got = fs.readSync(fd, head, 0, 4, 0);
    fs.closeSync(fd);
} catch (error) {
    fail(`the binary ${binary} of ${name} cannot be read (${error.code}); reinstall spillguard, or ${ALTERNATIVES}`);
}
if (got !== 4 || !head.equals(ELF)) {
    fail(`the binary ${binary} of ${name} is damaged (not an ELF program); reinstall spillguard, or ${ALTERNATIVES}`);
}

const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit' });
child.on('error', (error) => {
    fail(`cannot run ${binary} (${error.code}: ${error.message}); reinstall spillguard, or ${ALTERNATIVES}`);
});
// A host stops its server with a signal: it reaches spillguard, which
// stops its helper and exits; this process then exits as it did.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
}
child.on('exit', (code, signal) => {
    if (signal !== null) {
        process.removeAllListeners(signal);
        process.kill(process.pid, signal);
        return;
    }
    process.exit(code ?? 1);
});
