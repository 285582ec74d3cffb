#!/usr/bin/env bash
# The fresh-clone check: a clean clone of the committed HEAD (with ../shared beside
# it when there is one), then the README's quick-start commands exactly as the
# README gives them, then .ci/run. Nothing from this checkout's .venv is reused.
#
#   tools/fresh-clone.sh            # all of it (~15 min on 2 cores)
#   tools/fresh-clone.sh --no-ci    # only the README's two commands
#
# The clone is left in the printed directory for inspection; remove it afterwards.
set -euo pipefail

src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/kproto-fresh.XXXXXX")
echo "fresh clone of $(git -C "$src" rev-parse --short HEAD) in $work/main"
git clone -q "$src" "$work/main"
if [ -d "$src/../shared" ]; then cp -r "$src/../shared" "$work/shared"; fi
cd "$work/main"

# Leave any activated environment behind: the commands must bring their own.
unset VIRTUAL_ENV PYTHONPATH || true
python=$(command -v python3)
case "$python" in *"/.venv/"*|*"/venv/"*)
    PATH=$(echo "$PATH" | tr ':' '\n' | grep -v -e '/\.venv/' -e '/venv/' | paste -sd: -) ;;
esac

# The quick-start block's commands, read from the README so this cannot drift from it.
mapfile -t commands < <(awk '/^## Quick start/{q=1} q&&/^```sh/{b=1;next} b&&/^```/{exit} b' README.md \
                        | sed 's/[[:space:]]*#.*$//' | grep -v '^[[:space:]]*$')
if [ "${#commands[@]}" -ne 2 ]; then
    echo "expected the README's quick start to have two commands, found ${#commands[@]}" >&2
    exit 1
fi
for cmd in "${commands[@]}"; do
    echo "== $cmd"
    start=$SECONDS
    bash -c "$cmd"
    echo "== ok in $((SECONDS - start)) s: $cmd"
done

if [ "${1:-}" != "--no-ci" ]; then
    echo "== .ci/run"
    start=$SECONDS
    bash .ci/run
    echo "== ok in $((SECONDS - start)) s: .ci/run"
fi
echo "fresh clone passed: $work/main"
