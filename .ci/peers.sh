#!/usr/bin/env bash
# Installs the MCP peers the real-peer tests drive, into target/peers
# (ignored by git, reused by later runs): a Python venv with the official
# MCP SDK (`mcp`) and `mcp-server-time` from PyPI, and an npm prefix with
# `@modelcontextprotocol/server-everything` and the official TypeScript SDK
# `@modelcontextprotocol/sdk` (its client drives `spillguard mcp` in
# tests/peers/mcp_bridge.mjs). Prints the paths it made.
set -euo pipefail
cd "$(dirname "$0")/.."
peers="$PWD/target/peers"
mkdir -p "$peers"

if [ ! -x "$peers/venv/bin/python" ]; then
    python3 -m venv "$peers/venv"
fi
if ! "$peers/venv/bin/python" -c 'import mcp, mcp_server_time' 2>/dev/null; then
    "$peers/venv/bin/pip" install --quiet --disable-pip-version-check mcp mcp-server-time
fi

if [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
    [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    npm install --prefix "$peers/npm" --no-audit --no-fund --loglevel=error \
        @modelcontextprotocol/server-everything @modelcontextprotocol/sdk
fi

echo "peers: $peers/venv (mcp, mcp-server-time), $peers/npm (server-everything, sdk)"
