import Foundation
import MagicMirror
import MagicMirrorPostgreSQL

// The code of the README's "Many machines: PostgreSQL" and of this adapter's articles,
// exactly as printed (the root package's DocumentationCodeBlockTests checks it). It is
// compiled, not run: it connects to the documentation's example server. The tests that run
// the same calls against a real server are PostgreSQLConformanceTests and the others.
enum DocumentationSnippets {
    struct Todo: Recordable {
        var id = UUID()
        var title: String
        var done = false
    }

    /// README.md, "Many machines: PostgreSQL".
    static func readme() async throws {
let database = try await PostgreSQLDatabase(url: "postgres://alice@db.example.com/todos?sslmode=require")
let todos = try await Mirror<Todo>(database: database)   // password from PGPASSWORD
        _ = todos
    }

    /// The landing page, MagicMirrorPostgreSQL.md.
    static func landingPage() async throws {
let database = try await PostgreSQLDatabase(url: "postgres://alice@db.example.com/todos")
let todos = try await Mirror<Todo>(database: database)
        _ = todos
    }

    /// RunningOnPostgreSQL.md, "Set-up".
    static func setUp() async throws {
let database = try await PostgreSQLDatabase(url: "postgres://alice@db.example.com/todos?sslmode=require")
let todos = try await Mirror<Todo>(database: database)
// … the app runs; before it ends:
try await todos.flush()            // every change committed
await database.close()             // the connections ended cleanly
        _ = todos
    }

    /// RunningOnPostgreSQL.md, "Connections, pools and limits".
    static func roleAsCurrentUser() async throws {
let database = try await PostgreSQLDatabase(url: "postgres://alice@db.example.com/todos")
let mine = try await Mirror<Todo>(database: database, scope: .private)   // alice's
        _ = mine
    }

    /// RunningOnPostgreSQL.md, "When the server is away".
    static func offlineStart(replica: URL) async throws {
let server = try DeferredPostgreSQLDatabase(url: "postgres://alice@db.example.com/todos")
let replicated = ReplicatedDatabase(local: try JSONFileDatabase(directory: replica), remote: server)
let todos = try await Mirror<Todo>(database: replicated)   // at once, from the replica
        _ = todos
    }
}
