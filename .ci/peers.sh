#!/usr/bin/env bash
# Installs the MCP peers the real-peer tests drive, into target/peers
# (ignored by git, reused by later runs): a Python venv with the official
# MCP SDK (`mcp`) and `mcp-server-time` from PyPI, and an npm prefix with
# `@modelcontextprotocol/server-everything`, the official TypeScript SDK
# `@modelcontextprotocol/sdk` (its client drives `spillguard mcp` in
# adapter-tokio/cli/tests/peers/mcp_bridge.mjs and `spillguard stdio` in stdio_hosts.mjs),
# Claude Code and the MCP Inspector; and detect-secrets from PyPI, the
# scanner `cargo xtask bench --only redact` measures beside spillguard's
# redaction; and OpenTelemetry's Python protocol package and SDK
# (`opentelemetry-proto`, `opentelemetry-sdk`), which read what
# `--otel-file` writes; and Go with golang.org/x/mod from Debian, whose
# sumdb packages check the audit log's checkpoints and proofs. Prints the
# paths it made.
#
# Only locked code: every package, down the whole tree, comes at an exact
# version from a lock file of .ci/peers/ (npm's package-lock.json with
# each tarball's integrity hash; requirements.txt with each Python file's
# sha256), and no package's install script runs. Each install is reused
# while its lock is unchanged and made again when the lock changed.
# To take a new version: edit .ci/peers/package.json and run
# `npm install --package-lock-only --ignore-scripts` there, or edit
# .ci/peers/requirements.in and run `pip-compile --generate-hashes
# --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links`
# (pip-tools) there.
set -euo pipefail
# Another folder than target/peers may be given (`.ci/peers.sh DIR`).
dir=${1:+$(realpath -m "$1")}
cd "$(dirname "$0")/.."
locks="$PWD/.ci/peers"
peers="${dir:-$PWD/target/peers}"
mkdir -p "$peers"

# Pinned: the tests use the Python SDK's API (its ClientSession and its
# Client, which negotiates protocol 2026-07-28); a new release is taken on
# purpose. detect-secrets: its recall and false alarms are the bench's
# figures. opentelemetry-proto: decodes the OTLP JSON of `--otel-file`
# (adapter-tokio/cli/tests/peers/otel_file.py); the SDK comes with it.
.ci/locked-venv.sh "$peers/venv" "$locks/requirements.txt"

# Pinned too: Claude Code's `mcp list` health check and the Inspector's
# CLI are the Node-based hosts adapter-tokio/cli/tests/peers/stdio_hosts.mjs drives.
want=$(cat "$locks/package.json" "$locks/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$peers/npm/.lock-sha256" 2>/dev/null)" != "$want" ] ||
    [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
    [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
    [ ! -x "$peers/npm/node_modules/.bin/claude" ] ||
    [ ! -x "$peers/npm/node_modules/.bin/mcp-inspector" ]; then
    rm -rf "$peers/npm"
    mkdir -p "$peers/npm"
    cp "$locks/package.json" "$locks/package-lock.json" "$peers/npm/"
    # npm ci installs exactly the lock and fails where it disagrees with
    # package.json; --ignore-scripts: no package's install script runs.
    (cd "$peers/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    # The one install step the peers need: Claude Code's own postinstall
    # would put its platform package's native binary in place of the stub
    # bin/claude.exe. Done here instead of running that script.
    claude="$peers/npm/node_modules/@anthropic-ai/claude-code"
    native="$peers/npm/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    if [ ! -x "$native" ]; then
        echo "no Claude Code binary for this platform at $native (the lock holds linux-x64's)" >&2
        exit 1
    fi
    ln -f "$native" "$claude/bin/claude.exe" 2>/dev/null || cp "$native" "$claude/bin/claude.exe"
    echo "$want" >"$peers/npm/.lock-sha256"
fi

# Go and golang.org/x/mod (its sumdb/note and sumdb/tlog), from Debian:
# tests/tests/transparency_log.rs checks the audit log's keys, signed
# checkpoints and proofs with them (tests/go/src/tlogcheck). Installed
# once; needs root (as in CI).
if [ ! -x /usr/bin/go ] || [ ! -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -q golang-go golang-golang-x-mod-dev >/dev/null ||
            { apt-get update -q >/dev/null && apt-get install -y -q golang-go golang-golang-x-mod-dev >/dev/null; }
    else
        echo "Go and golang.org/x/mod are missing: as root, apt-get install golang-go golang-golang-x-mod-dev" >&2
    fi
fi

echo "peers: $peers/venv (mcp, mcp-server-time, detect-secrets, opentelemetry-proto, opentelemetry-sdk), $peers/npm (server-everything, sdk, claude-code, inspector)"
