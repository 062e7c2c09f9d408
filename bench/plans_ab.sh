#!/usr/bin/env bash
# CPU per request before and after a change, interleaved on one database: bench/request_floor.py's scenarios
# run by a `git archive` of the "before" commit (with this checkout's harness copied in, so both sides send
# the same requests) and by this checkout's working tree (or a second commit, extracted the same way).
#
#   DATABASE_URL=postgresql://postgres@127.0.0.1:5432/clinic_bench REDIS_URL=redis://127.0.0.1:6379/13 \
#       bench/plans_ab.sh [--before 1e4f960] [--after worktree|REV] [--requests 200] [--rounds 2] \
#       [--output bench/results/plans_retired.md] [--heading TEXT] [--only floor,token,...]
#
# Each round starts one process per side (request_floor.py --serve in its tree, PYTHONHASHSEED fixed), set up
# one after the other (demo data, API client, booking cells, lab orders: not measured), then alternates them
# in blocks of 50 requests, before-after then after-before, for every scenario (request_floor.py --ab), so
# both sides share the load of the same minute of a busy machine. The database is migrated first with the
# "after" side's migrations; the "before" side runs against it. Both sides use this checkout's .venv and
# .env. Writes the markdown table to --output and prints it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY="$ROOT/.venv/bin/python"
BEFORE=1e4f960
AFTER=worktree
REQUESTS=200
ROUNDS=2
OUTPUT="$ROOT/bench/results/plans_retired.md"
HEADING=""
ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --before) BEFORE=$2; shift 2 ;;
        --after) AFTER=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --output) OUTPUT=$(realpath -m "$2"); shift 2 ;;
        --heading) HEADING=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
: "${DATABASE_URL:?set DATABASE_URL to a database of your own (e.g. postgresql://postgres@127.0.0.1:5432/clinic_bench)}"
: "${REDIS_URL:?set REDIS_URL to a Redis database of your own (e.g. redis://127.0.0.1:6379/13)}"
case "$DATABASE_URL" in */clinic|*/clinic\?*) echo "refusing the shared database 'clinic'" >&2; exit 2 ;; esac
case "$REDIS_URL" in */15) echo "refusing Redis database 15" >&2; exit 2 ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/plans_ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

describe() {  # describe REV: short hash and subject, shortened
    local subject
    subject=$(git -C "$ROOT" log -1 --format=%s "$1")
    [ ${#subject} -gt 80 ] && subject="${subject:0:80}..."
    echo "$(git -C "$ROOT" rev-parse --short "$1") $subject"
}

extract() {  # extract REV DIR: the commit's files, this checkout's .env and harness
    mkdir -p "$2"
    git -C "$ROOT" archive "$1" | tar -x -C "$2"
    if [ -f "$ROOT/.env" ]; then cp "$ROOT/.env" "$2/.env"; fi
    cp "$ROOT/bench/request_floor.py" "$ROOT/bench/harness.py" "$2/bench/"
}

BEFORE_SHA=$(git -C "$ROOT" rev-parse --verify "$BEFORE^{commit}")
extract "$BEFORE_SHA" "$WORK/before"
BEFORE_LABEL="\`$(describe "$BEFORE_SHA")\` (\`$BEFORE\`, git archive)"
if [ "$AFTER" = worktree ]; then
    AFTER_DIR=$ROOT
    HEAD_SHA=$(git -C "$ROOT" rev-parse --short HEAD)
    DIRTY=$(git -C "$ROOT" status --porcelain --untracked-files=no | wc -l)
    AFTER_LABEL="the working tree at \`$HEAD_SHA\` ($DIRTY tracked files modified)"
    CHANGED=$(git -C "$ROOT" diff --name-only "$BEFORE_SHA" --)
    SAME=""
else
    AFTER_SHA=$(git -C "$ROOT" rev-parse --verify "$AFTER^{commit}")
    extract "$AFTER_SHA" "$WORK/after"
    AFTER_DIR=$WORK/after
    AFTER_LABEL="\`$(describe "$AFTER_SHA")\` (\`$AFTER\`, git archive)"
    CHANGED=$(git -C "$ROOT" diff --name-only "$BEFORE_SHA" "$AFTER_SHA" --)
    SAME=$([ "$(git -C "$ROOT" rev-parse "$BEFORE_SHA^{tree}")" = "$(git -C "$ROOT" rev-parse "$AFTER_SHA^{tree}")" ] && echo yes || true)
fi
if [ -z "$HEADING" ]; then
    if [ -n "$SAME" ]; then
        HEADING="Harness check run: the same code on both sides ($BEFORE and $AFTER are the same tree), so every difference is noise"
    else
        HEADING="Query plans retired: CPU per request before and after (bench/plans_ab.sh)"
    fi
fi

echo "== migrating with the after side's migrations" >&2
(cd "$AFTER_DIR" && "$PY" -m clinic.launch manage migrate --no-input -v 0)

COMMAND="bench/plans_ab.sh --before $BEFORE --after $AFTER --requests $REQUESTS --rounds $ROUNDS${ONLY:+ --only $ONLY}"
mkdir -p "$(dirname "$OUTPUT")"
"$PY" "$ROOT/bench/request_floor.py" --ab "$WORK/before" "$AFTER_DIR" --requests "$REQUESTS" --rounds "$ROUNDS" \
    ${ONLY:+--only "$ONLY"} --heading "$HEADING" --before-label "$BEFORE_LABEL" --after-label "$AFTER_LABEL" \
    --json "$WORK/ab.json" > "$WORK/table.md"
{
    cat "$WORK/table.md"
    echo
    echo "Command: \`$COMMAND\` (DATABASE_URL's database $(basename "${DATABASE_URL%%\?*}"), REDIS_URL's db ${REDIS_URL##*/})."
    echo
    COUNT=$(printf '%s' "$CHANGED" | grep -c . || true)
    echo "Tracked files that differ between the sides ($COUNT; untracked files of the working tree not listed):"
    if [ "$COUNT" -eq 0 ]; then echo "none"; else
        printf '%s\n' "$CHANGED" | grep . | sed -n '1,60{s/^/`/;s/$/`/;p}' | paste -sd ' ' -
    fi
} > "$OUTPUT"
cat "$OUTPUT"
