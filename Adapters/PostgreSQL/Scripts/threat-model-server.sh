#!/usr/bin/env bash
# A throwaway server set up as the threat model of "Running on PostgreSQL" describes, to try
# the schema as an adversary would:
#
#   Adapters/PostgreSQL/Scripts/threat-model-server.sh start DIR   prints the URLs, one per role
#   Adapters/PostgreSQL/Scripts/threat-model-server.sh remove DIR
#
# - database `magicmirror`; its `magicmirror` schema made (by the adapter itself) by
#   `mm_owner`, a role that is not a superuser;
# - login roles `alice`, `bob`, `carol` (no password: trust authentication, loopback only);
# - `CREATE` on schema `public` granted to every role, as up to PostgreSQL 14;
# - alice's private `Note` zone: `secret` (hers alone), `ro` shared read-only with bob and
#   `rw` shared read-write with bob; the public `Note` zone: `p1`.
#
# Needs the adapter built first (from the repository's root):
#   swift build --build-tests --package-path Adapters/PostgreSQL
# Then, for example: psql "postgres://bob@127.0.0.1:PORT/magicmirror"
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
command="${1:?usage: threat-model-server.sh start|remove DIR}"
DIR="${2:?usage: threat-model-server.sh $command DIR}"

if [ "$command" = remove ]; then
    exec "$HERE/postgres-cluster.sh" remove "$DIR"
fi
[ "$command" = start ] || { echo "usage: threat-model-server.sh start|remove DIR" >&2; exit 2; }

WORKER="$(swift build --package-path "$HERE/.." --show-bin-path)/pg-mirror-worker"
[ -x "$WORKER" ] || { echo "threat-model-server.sh: build first: swift build --build-tests --package-path Adapters/PostgreSQL" >&2; exit 1; }

PORT="$("$HERE/postgres-cluster.sh" start "$DIR")"
url() { echo "postgres://$1@127.0.0.1:$PORT/${2:-magicmirror}?sslmode=disable"; }
psql -q -v ON_ERROR_STOP=1 "$(url mirror postgres)" <<SQL
CREATE ROLE mm_owner LOGIN;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE carol LOGIN;
CREATE DATABASE magicmirror OWNER mm_owner;
SQL
psql -q -v ON_ERROR_STOP=1 "$(url mirror)" -c "GRANT CREATE ON SCHEMA public TO PUBLIC"

# The owner opens the database first: the adapter creates the schema.
echo "" | "$WORKER" --interactive "$(url mm_owner)" >/dev/null
printf '%s\n' "append secret" "set secret title alice-only" "append ro" "set ro title shared-read-only" \
    "append rw" "set rw title shared-read-write" "committed" "share ro bob readOnly" "share rw bob readWrite" \
    | "$WORKER" --sharing "$(url alice)" private >/dev/null
printf '%s\n' "append p1" "set p1 title public" "committed" | "$WORKER" --interactive "$(url alice)" >/dev/null

for role in mm_owner alice bob carol; do echo "$role $(url "$role")"; done
