#!/usr/bin/env bash
# Every test of the project, in one command: the root package's tests, the AES-GCM cipher's
# (Adapters/Encryption), then the PostgreSQL adapter's tests and the relay's (Relay/), each
# against a throwaway server that Adapters/PostgreSQL/Scripts/with-postgres.sh starts
# (installing PostgreSQL first if it is missing) and removes afterwards; the relay's also
# run haproxy (installed first if it is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each JSON-file database a process watches natively holds one inotify instance, and the
# root tests run hundreds of databases and child processes at once: at their peak they
# hold about 130, Linux's default limit per user is 128, and past it watching falls back to
# polling (documented), which the tests of native watching then report as failures. Where
# this shell may, it raises the limit; otherwise it says so.
limit=/proc/sys/fs/inotify/max_user_instances
if [ -r "$limit" ] && [ "$(cat "$limit")" -lt 1024 ]; then
    if [ -w "$limit" ]; then
        echo "test-all: raising fs.inotify.max_user_instances from $(cat "$limit") to 1024 for the tests"
        echo 1024 > "$limit"
    else
        echo "test-all: fs.inotify.max_user_instances is $(cat "$limit"); the tests may need up to ~130" \
            "(sudo sysctl fs.inotify.max_user_instances=1024)" >&2
    fi
fi
# Tests that store records that do not decode on purpose would each print the debug
# build's line about them ("MagicMirror: 1 stored record … is skipped"): quiet here, still
# reported to the tests (ToolMessagesTests turns it back on for the test of that line).
export MAGICMIRROR_SKIPPED_RECORDS_LOG=off
# Every test is a Swift Testing test: --disable-xctest skips the XCTest runner, which has
# nothing to run and would print "Executed 0 tests, with 0 failures" once per package.
swift test --disable-xctest "$@"
# The AES-GCM cipher's package (swift-crypto): its own tests, then PostgreSQL's.
swift test --disable-xctest --package-path Adapters/Encryption "$@"
Adapters/PostgreSQL/Scripts/with-postgres.sh swift test --disable-xctest --package-path Adapters/PostgreSQL "$@"
# The relay's tests start mirror-relay processes on fresh databases of their own server,
# and haproxy in front of two of them (installed here from Debian's packages when missing).
Relay/Scripts/haproxy.sh >/dev/null
Adapters/PostgreSQL/Scripts/with-postgres.sh swift test --disable-xctest --package-path Relay "$@"
