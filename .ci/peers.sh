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
# Pinned: the tests use this SDK's API (its ClientSession and its Client,
# which negotiates protocol 2026-07-28); a new release is taken on purpose.
python_peers=(mcp==2.3.0 mcp-server-time==2026.10.19)
if ! "$peers/venv/bin/python" -c '
import importlib.metadata as m, sys
sys.exit(m.version("mcp") != "2.3.0" or m.version("mcp-server-time") != "2026.10.19")
' 2>/dev/null; then
    "$peers/venv/bin/pip" install --quiet --disable-pip-version-check "${python_peers[@]}"
fi

if [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
    [ ! -e "$peers/npm/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    npm install --prefix "$peers/npm" --no-audit --no-fund --loglevel=error \
        @modelcontextprotocol/server-everything @modelcontextprotocol/sdk@1.32.2
fi

echo "peers: $peers/venv (mcp, mcp-server-time), $peers/npm (server-everything, sdk)"
