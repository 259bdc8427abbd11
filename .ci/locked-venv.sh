#!/usr/bin/env bash
# Usage: .ci/locked-venv.sh DIR LOCK
# Makes DIR a Python venv holding exactly the packages of LOCK, a
# requirements file with an exact version and the hashes of every package
# of the tree (written by pip-compile --generate-hashes). pip checks each
# downloaded file against its hashes, resolves nothing (--no-deps: the
# lock is the whole tree), and takes wheels only, so no package's build
# code runs. DIR is reused while it was made from this very lock (the
# lock's sha256 is kept in DIR/.lock-sha256), and made again otherwise.
set -euo pipefail
dir=$1
lock=$2
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.lock-sha256" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check \
    --require-hashes --no-deps --only-binary :all: -r "$lock"
echo "$want" >"$dir/.lock-sha256"
