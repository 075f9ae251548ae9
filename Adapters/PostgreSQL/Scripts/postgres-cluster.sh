#!/usr/bin/env bash
# A throwaway PostgreSQL cluster in a directory of its own, for tests and benchmarks.
#
#   postgres-cluster.sh start DIR    initdb into DIR/data (first time) and start; prints the port
#   postgres-cluster.sh stop DIR     stop (fast: clients are disconnected)
#   postgres-cluster.sh restart DIR  stop (fast), then start again on the same port
#   postgres-cluster.sh kill DIR     SIGKILL the server and its backends, as a crash would
#   postgres-cluster.sh remove DIR   stop at once and delete DIR
#
# Run as root, the server runs as an unprivileged user (postgres, else nobody): PostgreSQL
# refuses to run as root. It listens on DIR/sockets and on a free port of LISTEN (default
# 127.0.0.1), with trust authentication: a cluster for tests, never for data that matters.
# MAX_CONNECTIONS sets the server's max_connections (default 300; PostgreSQL's own is 100).
# PostgreSQL is installed with apt-get when missing (as root).
set -euo pipefail

command="${1:?usage: postgres-cluster.sh start|stop|restart|kill|remove DIR}"
DIR="${2:?usage: postgres-cluster.sh $command DIR}"
DATA="$DIR/data"

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
        echo "postgres-cluster.sh: PostgreSQL is not installed; run 'apt-get install -y postgresql' as root" >&2
        exit 1
    fi
    echo "postgres-cluster.sh: installing PostgreSQL" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1 \
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

# Runs a command with no file descriptor but 0, 1 and 2: the server it starts must not keep
# open a descriptor of whoever ran this script (a test runner waits for those to close).
without_inherited_fds() {
    python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# Kills every process still attached to the System V shared memory that DATA/postmaster.pid
# names: backends of a server killed with SIGKILL, which PostgreSQL will not start beside.
# (A backend forked just before the kill and still reading its startup packet notices its
# postmaster's death only at authentication_timeout, a minute later.)
kill_orphans() {
    [ -f "$DATA/postmaster.pid" ] || return 0
    local key
    key="$(sed -n 7p "$DATA/postmaster.pid" | awk '{print $1}')"
    [ -n "$key" ] || return 0
    local name maps pid
    name="$(printf 'SYSV%08x' "$key")"
    for maps in /proc/[0-9]*/maps; do
        pid="${maps#/proc/}"; pid="${pid%/maps}"
        if grep -q "$name" "$maps" 2>/dev/null; then
            [ "${1:-}" = list ] && ps -o pid,ppid,stat,wchan:32,etime,cmd -p "$pid" | tail -n +2 >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
}

start() {
    if [ ! -d "$DATA" ]; then
        mkdir -p "$DIR/sockets"
        chmod 0755 "$DIR"
        [ -n "$RUNAS" ] && chown "$RUNAS" "$DIR" "$DIR/sockets"
        local port
        port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
        echo "$port" >"$DIR/port"
        as_server "$BIN/initdb" -D "$DATA" -U mirror --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
            >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
        cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = '${LISTEN:-127.0.0.1}'
port = $port
unix_socket_directories = '$DIR/sockets'
max_connections = ${MAX_CONNECTIONS:-300}
CONF
        if [ -n "${LISTEN:-}" ]; then
            echo "host all all 0.0.0.0/0 trust" >>"$DATA/pg_hba.conf"
        fi
    fi
    # A server killed with SIGKILL may leave backends for a moment: retry until it starts,
    # killing any process of the dead server still attached to its shared memory.
    local attempt
    # A process in uninterruptible sleep (a write the disk has not finished) dies only when it
    # wakes, so the wait is a generous minute on a loaded machine.
    for attempt in $(seq 1 60); do
        if without_inherited_fds ${RUNAS:+runuser -u "$RUNAS" --} "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start \
            >/dev/null 2>&1; then
            cat "$DIR/port"
            return
        fi
        kill_orphans
        sleep 1
    done
    cat "$DIR/server.log" >&2
    echo "postgres-cluster.sh: processes still attached to the old server's shared memory:" >&2
    kill_orphans list
    exit 1
}

case "$command" in
    start) start ;;
    stop) as_server "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null ;;
    restart) as_server "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; start >/dev/null ;;
    kill)
        # Stopped first, the server forks no backend between listing its children and the kill.
        pid="$(head -n 1 "$DATA/postmaster.pid")"
        kill -STOP "$pid" 2>/dev/null || true
        children="$(pgrep -P "$pid" || true)"
        kill -9 "$pid" $children 2>/dev/null || true
        ;;
    remove)
        as_server "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
        rm -rf "$DIR"
        ;;
    *) echo "postgres-cluster.sh: unknown command $command" >&2; exit 2 ;;
esac
