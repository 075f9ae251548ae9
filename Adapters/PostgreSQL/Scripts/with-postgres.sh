#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server, then stops the server and removes it.
#
#   Adapters/PostgreSQL/Scripts/with-postgres.sh swift test --package-path Adapters/PostgreSQL
#
# The cluster is made with initdb in a new temporary directory, owned by an unprivileged
# user when run as root (PostgreSQL refuses to run as root), and listens on a free loopback
# port and on a Unix socket in that directory; nothing else on the machine is touched.
# PostgreSQL is installed with apt-get when missing (as root).
#
# The command sees:
#   MAGICMIRROR_POSTGRES_URL   postgres://mirror@127.0.0.1:<port>/postgres (superuser, trust)
#   MAGICMIRROR_POSTGRES_DATA  the data directory    (for tests that restart or kill the server)
#   MAGICMIRROR_POSTGRES_BIN   the server's bin directory
#   MAGICMIRROR_POSTGRES_RUNAS the user the server runs as (empty: the current user)
#   MAGICMIRROR_POSTGRES_PORT  the port
# and the script exits with the command's status.
set -euo pipefail

find_bin() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir)"
        if [ -x "$dir/initdb" ]; then echo "$dir"; return; fi
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ]; then echo "$dir"; return; fi
    done
}

BIN="$(find_bin || true)"
if [ -z "$BIN" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "with-postgres.sh: PostgreSQL is not installed; run 'apt-get install -y postgresql' as root" >&2
        exit 1
    fi
    echo "with-postgres.sh: installing PostgreSQL" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }
    BIN="$(find_bin)"
fi

RUNAS=""
if [ "$(id -u)" = 0 ]; then
    if id postgres >/dev/null 2>&1; then RUNAS=postgres; else RUNAS=nobody; fi
fi
as_server() {
    if [ -n "$RUNAS" ]; then runuser -u "$RUNAS" -- "$@"; else "$@"; fi
}

DIR="$(mktemp -d /tmp/magicmirror-postgres.XXXXXX)"
chmod 0755 "$DIR"
DATA="$DIR/data"
SOCKETS="$DIR/sockets"
mkdir -p "$SOCKETS"
[ -n "$RUNAS" ] && chown "$RUNAS" "$DIR" "$SOCKETS"

cleanup() {
    as_server "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"

as_server "$BIN/initdb" -D "$DATA" -U mirror --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCKETS'
max_connections = 200
fsync = on
CONF
as_server "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start >/dev/null \
    || { cat "$DIR/server.log" >&2; exit 1; }

export MAGICMIRROR_POSTGRES_URL="postgres://mirror@127.0.0.1:$PORT/postgres"
export MAGICMIRROR_POSTGRES_DATA="$DATA"
export MAGICMIRROR_POSTGRES_BIN="$BIN"
export MAGICMIRROR_POSTGRES_RUNAS="$RUNAS"
export MAGICMIRROR_POSTGRES_PORT="$PORT"
echo "with-postgres.sh: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT ($DATA)" >&2

status=0
"$@" || status=$?
exit $status
