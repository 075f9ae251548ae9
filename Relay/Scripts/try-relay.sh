#!/usr/bin/env bash
# A relay to try, on the server MAGICMIRROR_POSTGRES_URL names (a superuser's URL, as
# with-postgres.sh sets it), until Ctrl-C:
#
#   Adapters/PostgreSQL/Scripts/with-postgres.sh Relay/Scripts/try-relay.sh [PORT]
#
# It sets the server up for a relay (`mirror-relay setup`, relay role todo_relay), makes a
# secret for this run, prints for two users, alice and bob, the lines another terminal
# pastes to use mirror-todo-relay through it, and runs the relay on 127.0.0.1:PORT (8080 by
# default). MIRROR_RELAY_BIN_PATH names a directory with mirror-relay already built;
# otherwise this script builds it.
set -euo pipefail
PORT="${1:-8080}"
: "${MAGICMIRROR_POSTGRES_URL:?set it to a superuser URL, for example by running this script under Adapters/PostgreSQL/Scripts/with-postgres.sh}"
RELAY_PACKAGE="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${MIRROR_RELAY_BIN_PATH:-}" ]; then
    swift build --package-path "$RELAY_PACKAGE" --product mirror-relay >&2
    swift build --package-path "$RELAY_PACKAGE" --product mirror-todo-relay >&2
    MIRROR_RELAY_BIN_PATH="$(swift build --package-path "$RELAY_PACKAGE" --show-bin-path)"
fi
RELAY="$MIRROR_RELAY_BIN_PATH/mirror-relay"
"$RELAY" setup --admin-url "$MAGICMIRROR_POSTGRES_URL" --relay-role todo_relay >&2
# The relay connects as its own role: the same URL with todo_relay for the user.
RELAY_DATABASE_URL="$(printf '%s' "$MAGICMIRROR_POSTGRES_URL" | sed -E 's#^(postgres(ql)?://)([^@/]*@)?#\1todo_relay@#')"
MIRROR_RELAY_HS256_SECRET="$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
MIRROR_RELAY_AUDIENCE=mirror-todo
export MIRROR_RELAY_HS256_SECRET MIRROR_RELAY_AUDIENCE
for user in alice bob; do
    echo "# in a terminal of $user's (tokens last 24 hours):"
    echo "export MAGICMIRROR_RELAY_URL=http://127.0.0.1:$PORT MAGICMIRROR_RELAY_TOKEN=$("$RELAY" token --subject "$user" --lifetime 86400)"
done
echo "# then: swift run --package-path Relay mirror-todo-relay watch   (or add, list, done …)"
exec "$RELAY" --database-url "$RELAY_DATABASE_URL" --listen "127.0.0.1:$PORT"
