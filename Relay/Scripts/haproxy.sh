#!/usr/bin/env bash
# Prints the path of haproxy, installing it from Debian's packages first when it is missing
# (as root: apt-get install, after apt-get update if the first attempt fails). The relay's
# tests run haproxy in front of two relays; they call this script, and so does
# Scripts/test-all.sh before the relay's tests, so that a fresh machine (CI) needs nothing.
set -euo pipefail

if ! command -v haproxy >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "haproxy.sh: haproxy is not installed; run 'apt-get install -y haproxy' as root" >&2
        exit 1
    fi
    echo "haproxy.sh: installing haproxy" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy >/dev/null; }
fi
command -v haproxy
