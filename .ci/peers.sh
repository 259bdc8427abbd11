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
# `--otel-file` writes. Prints the paths it made.
set -euo pipefail
cd "$(dirname "$0")/.."
peers="$PWD/target/peers"
mkdir -p "$peers"

if [ ! -x "$peers/venv/bin/python" ]; then
    python3 -m venv "$peers/venv"
fi
# Pinned: the tests use this SDK's API (its ClientSession and its Client,
# which negotiates protocol 2026-07-28); a new release is taken on purpose.
# detect-secrets: its recall and false alarms are the bench's figures.
# opentelemetry-proto: decodes the OTLP JSON of `--otel-file`
# (adapter-tokio/cli/tests/peers/otel_file.py); the SDK comes with it.
python_peers=(mcp==2.3.0 mcp-server-time==2026.10.19 detect-secrets==1.5.0
    opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2)
if ! "$peers/venv/bin/python" -c '
import importlib.metadata as m, sys
sys.exit(m.version("mcp") != "2.3.0" or m.version("mcp-server-time") != "2026.10.19"
         or m.version("detect-secrets") != "1.5.0"
         or m.version("opentelemetry-proto") != "1.45.2"
         or m.version("opentelemetry-sdk") != "1.45.2")
' 2>/dev/null; then
    "$peers/venv/bin/pip" install --quiet --disable-pip-version-check "${python_peers[@]}"
fi

# Pinned too: Claude Code's `mcp list` health check and the Inspector's
# CLI are the Node-based hosts adapter-tokio/cli/tests/peers/stdio_hosts.mjs drives.
npm_peers=(
    @modelcontextprotocol/server-everything
    @modelcontextprotocol/sdk@1.32.2
    @anthropic-ai/claude-code@2.1.332
    @modelcontextprotocol/inspector@2.12.0
)
if [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
    [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
    [ ! -x "$peers/npm/node_modules/.bin/claude" ] ||
    [ ! -x "$peers/npm/node_modules/.bin/mcp-inspector" ]; then
    npm install --prefix "$peers/npm" --no-audit --no-fund --loglevel=error "${npm_peers[@]}"
fi

echo "peers: $peers/venv (mcp, mcp-server-time, detect-secrets, opentelemetry-proto, opentelemetry-sdk), $peers/npm (server-everything, sdk, claude-code, inspector)"
