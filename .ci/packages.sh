#!/usr/bin/env bash
# The published crates as crates.io will hold them: `cargo package
# --workspace`, every publishable .crate unpacked into a temporary folder
# outside the checkout, and the tests of all of them built and run there,
# with every feature. That workspace holds nothing but the unpacked
# packages: its [patch.crates-io] serves each spillguard-* dependency from
# its sibling package, as the registry would, so a test that reads a file
# outside its own package fails here, and neither `../..` nor `git` finds
# the checkout. This builds every package from its tarball, as `cargo
# package`'s verification does (though in one workspace, so with the
# features its siblings ask for), so that step is skipped. --allow-dirty:
# a local run packages the work tree as it is (CI's checkout is clean).
# `.ci/packages.sh DIR` tests the .crate files in DIR instead of packaging
# (the release's test job: the very files its publish job uploads).
#
# Needs the peers of .ci/peers.sh (SPILLGUARD_PEERS, default target/peers):
# the CLI's tests drive the MCP SDKs and Claude Code from its package, the
# tokio adapter's drive rmcp against Python and npm servers.
set -euo pipefail
given=${1:+$(realpath "$1")}
cd "$(dirname "$0")/.."
root="$PWD"
# The build is kept with the repository's; the sources are not.
check="$root/target/package-check"
sources=$(mktemp -d "${TMPDIR:-/tmp}/spillguard-packages.XXXXXX")
trap 'rm -rf "$sources"' EXIT
version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-cli"))')
crates=(spillguard-core spillguard-host spillguard-std spillguard-smol spillguard-tokio spillguard-cli)

packaged="${CARGO_TARGET_DIR:-target}/package"
if [ -n "$given" ]; then
    echo "-- the .crate files of $given (version $version)"
    packaged=$given
else
    echo "-- cargo package --workspace (version $version)"
    # xtask and spillguard-tests are never published (xtask depends on the
    # unpublished spillguard-tests, which cargo could not resolve from a registry).
    cargo package --workspace --exclude xtask --exclude spillguard-tests --no-verify --allow-dirty --quiet
fi

members=""
patches=""
for crate in "${crates[@]}"; do
    tar xzf "$packaged/$crate-$version.crate" -C "$sources"
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
[profile.dev]
debug = \"line-tables-only\"

[profile.dev.package.\"*\"]
opt-level = 2
debug = false
" >"$sources/Cargo.toml"
# The same dependency versions as the repository's tests ran with.
cp Cargo.lock "$sources/Cargo.lock"

echo "-- the tests of every package, from the packages alone"
export SPILLGUARD_PEERS="${SPILLGUARD_PEERS:-$root/target/peers}"
cd "$sources"
# Every feature: the tokio adapter's `rmcp` transport and its tests against
# the real peers, the `tracing` events.
CARGO_TARGET_DIR="$check/target" cargo test --workspace --all-features
