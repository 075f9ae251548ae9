// mirror-todo-postgres: mirror-todo's shared to-do list on a PostgreSQL server, so that
// terminals on several machines edit one list live.
//
//     export MAGICMIRROR_POSTGRES_URL=postgres://alice@db.example.com/todos
//     mirror-todo-postgres watch                 # on one machine
//     mirror-todo-postgres add "Buy milk"        # on another
//
// The console is mirror-todo's own (TodoConsoleKit in the root package); only where the
// list lives differs: `--url URL`, else $MAGICMIRROR_POSTGRES_URL. A password, if the
// server asks for one, comes from PGPASSWORD, never from the URL.
import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import TodoConsoleKit

// A write to a connection the server closed raises SIGPIPE; get the error instead.
signal(SIGPIPE, SIG_IGN)

let server = TodoStorage(
    option: "--url", placeholder: "URL",
    help: "the server, postgres://ROLE@HOST:PORT/DATABASE (default:\n$MAGICMIRROR_POSTGRES_URL; password from PGPASSWORD)"
) { value in
    let environment = ProcessInfo.processInfo.environment
    guard let url = value ?? environment["MAGICMIRROR_POSTGRES_URL"].flatMap({ $0.isEmpty ? nil : $0 }) else {
        throw MirrorError(
            .unavailable,
            "no server: pass --url postgres://ROLE@HOST/DATABASE or set MAGICMIRROR_POSTGRES_URL")
    }
    let database = try await PostgreSQLDatabase(url: url, environment: environment)
    // The URL carries no password (it is refused there). A private list belongs to the
    // role the database connects as.
    return TodoStorage.Opened(
        database: database, location: url, privateUser: try MirrorUser(name: database.role)
    ) { await database.close() }
}

await TodoConsole.main(program: "mirror-todo-postgres", storage: server)
