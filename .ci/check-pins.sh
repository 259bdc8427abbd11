#!/usr/bin/env bash
# Usage: .ci/check-pins.sh [WORKFLOW...]   (default: .github/workflows/*.yml)
# Fails unless every `uses:` of the workflows names an action by a full
# commit: `owner/repo@<40 hex digits> # vX...`, the tag that commit was
# looked up from in the trailing comment. A tag or a branch can be moved
# to other code after review; a commit cannot. A local action (`./...`)
# is the checkout's own code and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    set -- .github/workflows/*.yml
fi
bad=0
for file in "$@"; do
    while IFS= read -r hit; do
        line=${hit%%:*}
        text=${hit#*:}
        ref=$(printf '%s' "$text" | sed -E 's/^[[:space:]]*(-[[:space:]]+)?uses:[[:space:]]*//')
        case "$ref" in
            ./*) continue ;;
        esac
        if ! printf '%s\n' "$ref" |
            grep -qE '^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}[[:space:]]+#[[:space:]]*v[0-9][^[:space:]]*[[:space:]]*$'; then
            echo "$file:$line: not pinned to a commit with its tag in a comment: $ref" >&2
            bad=1
        fi
    done < <(grep -nE '^[[:space:]]*(-[[:space:]]+)?uses:' "$file" || true)
done
if [ "$bad" -ne 0 ]; then
    exit 1
fi
echo "pins: every action of $* is pinned to a commit"
