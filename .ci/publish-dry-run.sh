#!/usr/bin/env bash
# Everything a release does short of the upload, on the artifacts
# .ci/dist.sh built into target/dist (the wheel's `twine check --strict`
# runs there):
#   - every manifest states one version (`cargo xtask release --check`);
#   - `cargo publish --dry-run` of spillguard-core, the one crate whose
#     dependencies are all on crates.io already (each other crate depends
#     on a sibling that is published in the same release; .ci/packages.sh
#     builds and tests every crate from its packaged .crate instead);
#   - `npm publish --dry-run` of the platform package, then the launcher.
# Needs the network for npm's dry run (it reads the registry's metadata).
set -euo pipefail
cd "$(dirname "$0")/.."
dist="$PWD/target/dist"

echo "-- cargo xtask release --check"
cargo xtask release --check

version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-core"))')

echo "-- cargo publish --dry-run -p spillguard-core"
cargo publish --dry-run --allow-dirty -p spillguard-core --quiet

for tarball in "spillguard-linux-x64-$version.tgz" "spillguard-$version.tgz"; do
    echo "-- npm publish --dry-run $tarball"
    npm publish --dry-run --access public "$dist/$tarball" 2>&1 | grep -E '^(\+ |npm notice (name|version|total files))'
done
