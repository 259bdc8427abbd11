#!/usr/bin/env bash
# Usage: .ci/publish-crates.sh DIR   (PUBLISH_CRATES_DRY_RUN=1: compare only)
# Publishes to crates.io the very .crate files the release's build job
# tested (.ci/packages.sh), which are in DIR. Needs CARGO_REGISTRY_TOKEN.
#
# Why a comparison and not an upload of the files themselves: `cargo
# publish` packages the crate again and cannot take a .crate file, and
# sending the files to crates.io's publish API directly would mean
# writing by hand the metadata cargo sends beside each file (every
# dependency with its kind, features and registry), which is where a
# mistake would publish a crate that builds differently. cargo's packaging
# is reproducible (fixed timestamps and owners in the tarball, the same
# commit, Cargo.lock and toolchain), so the job packages again, checks
# that every fresh .crate has the sha256 of the tested one, and stops
# before any upload if one differs. `cargo publish --workspace` then
# packages the same way again and uploads in dependency order; the files
# it uploaded are compared once more (a mismatch there fails the job, too
# late to hold the upload back, but said).
#
# --no-verify: the tested files were built and tested in the build job;
# here no dependency's build script or proc macro runs beside the token.
set -euo pipefail
tested=$(realpath "$1")
cd "$(dirname "$0")/.."
version=$(cargo metadata --no-deps --format-version 1 --locked \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "spillguard-cli"))')
crates=(spillguard-core spillguard-host spillguard-std spillguard-smol spillguard-tokio spillguard-cli)
# xtask and spillguard-tests are never published.
unpublished=(--exclude xtask --exclude spillguard-tests)
package_dir="${CARGO_TARGET_DIR:-target}/package"

compare() {
    local when=$1 made=$2 bad=0 crate file
    for crate in "${crates[@]}"; do
        file="$crate-$version.crate"
        if [ ! -f "$tested/$file" ]; then
            echo "$file: not among the tested files in $tested" >&2
            bad=1
        elif [ ! -f "$made/$file" ]; then
            echo "$file: not in $made" >&2
            bad=1
        elif ! cmp -s "$tested/$file" "$made/$file"; then
            echo "$file: $when differs from the tested file" \
                "(tested $(sha256sum <"$tested/$file" | cut -c1-16), now $(sha256sum <"$made/$file" | cut -c1-16))" >&2
            bad=1
        else
            echo "$file: sha256 $(sha256sum <"$made/$file" | cut -d' ' -f1), $when is the tested file"
        fi
    done
    return "$bad"
}

echo "-- cargo package (version $version), compared with the tested files"
rm -rf "$package_dir"
cargo package --workspace "${unpublished[@]}" --no-verify --locked --quiet
compare "the package made here" "$package_dir"

if [ "${PUBLISH_CRATES_DRY_RUN:-}" = 1 ]; then
    echo "-- dry run: nothing uploaded"
    exit 0
fi
echo "-- cargo publish --workspace (in dependency order, each waited for in the index)"
rm -rf "$package_dir"
cargo publish --workspace "${unpublished[@]}" --no-verify --locked
# cargo publish --workspace keeps the files it uploaded in package/tmp-crate.
compare "the file cargo publish uploaded" "$package_dir/tmp-crate"
