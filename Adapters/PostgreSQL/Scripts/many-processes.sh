#!/usr/bin/env bash
# N real processes (pg-mirror-worker), one mirror each, on a throwaway server with
# PostgreSQL's default max_connections (100): each appends, edits and deletes COUNT items of
# one shared zone and waits until its mirror shows every worker's final state (120 s at most
# per step). Prints the server's client sessions every 3 s, then how many converged.
#
#   swift build --package-path Adapters/PostgreSQL
#   N=90 COUNT=4 Adapters/PostgreSQL/Scripts/many-processes.sh
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
N="${N:-90}"
COUNT="${COUNT:-4}"
WORKER="${WORKER:-$HERE/../.build/debug/pg-mirror-worker}"
OUT="$(mktemp -d /tmp/magicmirror-many.XXXXXX)"
DIR="$(mktemp -d /tmp/magicmirror-postgres.XXXXXX)"
trap '"$HERE/postgres-cluster.sh" remove "$DIR"; rm -rf "$OUT"' EXIT INT TERM
PORT="$(MAX_CONNECTIONS="${MAX_CONNECTIONS:-100}" "$HERE/postgres-cluster.sh" start "$DIR")"
URL="postgres://mirror@127.0.0.1:$PORT/postgres?sslmode=disable"
echo "max_connections $(psql "$URL" -Atc 'show max_connections'), $N processes"
names="$(seq -s, -f "w%g" 1 "$N")"
start=$(date +%s)
pids=()
for i in $(seq 1 "$N"); do
    "$WORKER" "$URL" "w$i" "$COUNT" "$names" >"$OUT/out.$i" 2>"$OUT/err.$i" &
    pids+=($!)
done
(
    while sleep 3; do
        sessions="$(psql "$URL" -Atc "select count(*) from pg_stat_activity where backend_type = 'client backend'" 2>/dev/null || echo full)"
        echo "$(( $(date +%s) - start )) s: $sessions sessions, $(grep -l converged "$OUT"/err.* 2>/dev/null | wc -l) converged"
    done
) &
monitor=$!
for pid in "${pids[@]}"; do wait "$pid" || true; done
kill "$monitor" 2>/dev/null || true
echo "$(grep -l '"converged":true' "$OUT"/out.* | wc -l) of $N converged in $(( $(date +%s) - start )) s"
echo "error notifications, by kind:"
grep -ho "error: MirrorError\.[a-zA-Z]*" "$OUT"/err.* | sort | uniq -c | sort -rn || true
