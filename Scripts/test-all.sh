#!/usr/bin/env bash
# Every test of the project, in one command: the root package's tests, then the PostgreSQL
# adapter's tests against a throwaway server that Adapters/PostgreSQL/Scripts/with-postgres.sh
# starts (installing PostgreSQL first if it is missing) and removes afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
swift test "$@"
Adapters/PostgreSQL/Scripts/with-postgres.sh swift test --package-path Adapters/PostgreSQL "$@"
