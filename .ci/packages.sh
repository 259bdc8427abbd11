#!/usr/bin/env bash
# The published crates as crates.io will hold them: `cargo package
# --workspace`, then every publishable .crate unpacked into
# target/package-check/src, and the tests of all of them built and run
# there. That workspace holds nothing but the unpacked packages: its
# [patch.crates-io] serves each spillguard-* dependency from its sibling
# package, as the registry would, so a test that reads a file outside its
# own package fails here. Building the packages' tests also does what
# `cargo package`'s verification step does (build each one from its
# tarball), so that step is skipped. --allow-dirty: a local run packages
# the work tree as it is (CI's checkout is clean).
#
# Needs the peers of .ci/peers.sh (SPILLGUARD_PEERS, default target/peers):
# the CLI's tests drive the MCP SDKs and Claude Code from its package.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
check="$root/target/package-check"
version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-cli"))')
crates=(spillguard-core spillguard-kit spillguard-std spillguard-smol spillguard-tokio spillguard-cli)

echo "-- cargo package --workspace (version $version)"
cargo package --workspace --no-verify --allow-dirty --quiet

rm -rf "$check/src"
mkdir -p "$check/src"
members=""
patches=""
for crate in "${crates[@]}"; do
    tar xzf "target/package/$crate-$version.crate" -C "$check/src"
    members+="    \"$crate-$version\",\n"
    patches+="$crate = { path = \"$crate-$version\" }\n"
done
printf '%b' "# Written by .ci/packages.sh: the unpacked packages, and nothing else.
[workspace]
resolver = \"3\"
members = [
$members]

[patch.crates-io]
$patches
# As the repository's workspace builds its tests.
[profile.dev.package.\"*\"]
opt-level = 2
" >"$check/src/Cargo.toml"
# The same dependency versions as the repository's tests ran with.
cp Cargo.lock "$check/src/Cargo.lock"

for crate in "${crates[@]}"; do
    outside=$(cd "$check/src/$crate-$version" && find . -type l | head -1)
    if [ -n "$outside" ]; then
        echo "$crate: the package holds a symbolic link ($outside)" >&2
        exit 1
    fi
done

echo "-- the tests of every package, from the packages alone"
export SPILLGUARD_PEERS="${SPILLGUARD_PEERS:-$root/target/peers}"
cd "$check/src"
CARGO_TARGET_DIR="$check/target" cargo test --workspace
