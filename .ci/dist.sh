#!/usr/bin/env bash
# Builds the release artifacts of the `spillguard` command once, into
# target/dist:
#   spillguard-VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#     (maturin, `bindings = "bin"`: the binary, linked by zig against
#     glibc 2.17 so that one wheel runs on every current Linux),
#   spillguard-linux-x64-VERSION.tgz (@spillguard/linux-x64: that binary)
#   spillguard-VERSION.tgz (spillguard: the launcher, which depends on it)
# VERSION is the workspace's. The packaging tools (maturin, ziglang,
# twine, uv) live in a venv in target/dist-tools, made from the hashed
# lock .ci/dist-tools/requirements.txt and reused while it is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tools="$root/target/dist-tools"
dist="$root/target/dist"

version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-cli"))')

# Locked: the wheel's tag and layout come from these versions, and every
# package of their tree is installed at an exact version with its hash
# (.ci/dist-tools/requirements.txt, wheels only).
.ci/locked-venv.sh "$tools/venv" .ci/dist-tools/requirements.txt
export PATH="$tools/venv/bin:$PATH"

rm -rf "$dist"
mkdir -p "$dist"
started=$(date +%s)
maturin build --release --zig --compatibility manylinux2014 \
    --target x86_64-unknown-linux-gnu -m adapter-tokio/cli/Cargo.toml --out "$dist" >&2
twine check --strict "$dist"/*.whl >&2
binary="$root/target/x86_64-unknown-linux-gnu/release/spillguard"

# The npm packages: each staged with the workspace's version, the
# README and the licences; the platform package with the wheel's binary.
stage="$dist/npm-stage"
for package in spillguard linux-x64; do
    mkdir -p "$stage/$package"
    cp -r adapter-tokio/cli/npm/$package/. "$stage/$package/"
    cp adapter-tokio/cli/LICENSE-MIT adapter-tokio/cli/LICENSE-APACHE "$stage/$package/"
done
cp adapter-tokio/cli/README.md "$stage/spillguard/"
mkdir -p "$stage/linux-x64/bin"
cp "$binary" "$stage/linux-x64/bin/spillguard"
chmod 755 "$stage/linux-x64/bin/spillguard" "$stage/spillguard/bin/spillguard.js"
node -e '
const fs = require("fs");
const [stage, version] = process.argv.slice(1);
for (const name of ["spillguard", "linux-x64"]) {
    const file = `${stage}/${name}/package.json`;
    const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
    pkg.version = version;
    if (pkg.optionalDependencies) pkg.optionalDependencies["@spillguard/linux-x64"] = version;
    fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
}' "$stage" "$version"
(cd "$dist" && npm pack --silent "$stage/linux-x64" "$stage/spillguard" >/dev/null)
rm -rf "$stage"

echo "dist: built in $(($(date +%s) - started)) s (version $version)" >&2
for artifact in "$dist"/*; do
    echo "dist: $(basename "$artifact") $(stat -c %s "$artifact") bytes" >&2
done
