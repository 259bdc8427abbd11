#!/usr/bin/env bash
# Proves each install channel with the artifacts .ci/dist.sh built in
# target/dist: each is installed into a fresh prefix under
# target/dist-check, with no network, and driven by a real MCP client.
#   pip: a fresh venv; the Python SDK drives the installed
#        `spillguard stdio --mcp -- mcp-server-time` (adapter-tokio/cli/tests/peers/python_sdk.py);
#   uvx: `uvx --from WHEEL spillguard`, offline: --version and a round trip;
#   cargo: `cargo install --path adapter-tokio/cli` (the READMEs' first
#        install route, timed) into a fresh root; every JSON and TOML host
#        entry of the package README runs with it
#        (adapter-tokio/cli/tests/peers/readme_configs.py);
#   npm: both tarballs into a fresh prefix, offline; the TypeScript SDK
#        drives `npx spillguard mcp --tools …` and the launcher's bad cases
#        (adapter-tokio/cli/tests/peers/npm_channel.mjs); Claude Code runs the README's
#        `claude mcp add` lines with the npm-installed `spillguard`.
# Needs the peers of .ci/peers.sh in target/peers.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist="$root/target/dist"
check="$root/target/dist-check"
peers="$root/target/peers"
tools="$root/target/dist-tools/venv/bin"
version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-cli"))')
wheel=$(ls "$dist"/spillguard-"$version"-*.whl)
rm -rf "$check"
mkdir -p "$check"
started=$(date +%s)

echo "== channel pip: $(basename "$wheel") into a fresh venv"
python3 -m venv "$check/venv"
"$check/venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
test "$("$check/venv/bin/spillguard" --version)" = "spillguard $version"
"$peers/venv/bin/python" adapter-tokio/cli/tests/peers/python_sdk.py "$check/venv/bin/spillguard"

echo "== channel uvx: uvx --from $(basename "$wheel") spillguard, offline"
export UV_CACHE_DIR="$check/uv-cache" UV_OFFLINE=1 UV_NO_CONFIG=1
test "$("$tools/uvx" --from "$wheel" spillguard --version)" = "spillguard $version"
ping='{"jsonrpc":"2.0","id":1,"method":"ping"}'
echoed=$(printf '%s\n' "$ping" | "$tools/uvx" --from "$wheel" spillguard stdio --record "$check/uvx.jsonl" -- cat)
test "$echoed" = "$ping"
grep -q '"state":"completed"' "$check/uvx.jsonl"

echo "== channel npm: both tarballs into a fresh prefix, offline"
mkdir -p "$check/npm"
npm install --prefix "$check/npm" --offline --no-audit --no-fund --loglevel=error \
    "$dist/spillguard-linux-x64-$version.tgz" "$dist/spillguard-$version.tgz"
SPILLGUARD_PEERS="$peers" node adapter-tokio/cli/tests/peers/npm_channel.mjs "$check/npm" adapter-tokio/cli/tests/peers/mcp_tools.toml "$version"

echo "== channel cargo (the README's first install route): cargo install --path adapter-tokio/cli, offline"
install_started=$(date +%s)
cargo install --quiet --offline --locked --path adapter-tokio/cli --root "$check/cargo" \
    --target-dir "$root/target/cargo-install"
echo "cargo install --path adapter-tokio/cli: $(($(date +%s) - install_started)) s"
test "$("$check/cargo/bin/spillguard" --version)" = "spillguard $version"
echoed=$(printf '%s\n' "$ping" | "$check/cargo/bin/spillguard" stdio --record "$check/cargo.jsonl" -- cat)
test "$echoed" = "$ping"

echo "== the package README's host entries, as written, with the command the README's first route installed (and Claude Code's with the npm channel's)"
"$peers/venv/bin/python" adapter-tokio/cli/tests/peers/readme_configs.py adapter-tokio/cli/README.md \
    "$check/cargo/bin:$peers/venv/bin" "$check/npm/node_modules/.bin:$peers/venv/bin" \
    adapter-tokio/cli/examples/tools.toml "$peers/npm/node_modules/.bin/claude"

echo "channels: every channel checked in $(($(date +%s) - started)) s"
