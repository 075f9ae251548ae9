#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server, then stops the server and removes it.
#
#   Adapters/PostgreSQL/Scripts/with-postgres.sh swift test --package-path Adapters/PostgreSQL
#
# The cluster (see postgres-cluster.sh beside this script) lives in a new temporary
# directory, runs as an unprivileged user when started by root, and listens on a free
# loopback port and a Unix socket in that directory; PostgreSQL is installed when missing.
# The command sees MAGICMIRROR_POSTGRES_URL (postgres://mirror@127.0.0.1:PORT/postgres, the
# superuser, trust authentication) and MAGICMIRROR_POSTGRES_SOCKETS (the directory of its
# Unix socket), and the script exits with the command's status.
set -euo pipefail
CLUSTER="$(cd "$(dirname "$0")" && pwd)/postgres-cluster.sh"
DIR="$(mktemp -d /tmp/magicmirror-postgres.XXXXXX)"
trap '"$CLUSTER" remove "$DIR"' EXIT INT TERM
PORT="$("$CLUSTER" start "$DIR")"
export MAGICMIRROR_POSTGRES_URL="postgres://mirror@127.0.0.1:$PORT/postgres"
# The directory of its Unix socket, which processes in other network namespaces reach.
export MAGICMIRROR_POSTGRES_SOCKETS="$DIR/sockets"
echo "with-postgres.sh: PostgreSQL on 127.0.0.1:$PORT ($DIR)" >&2
status=0
"$@" || status=$?
exit $status
