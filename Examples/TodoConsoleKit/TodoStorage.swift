import Foundation
import MagicMirror

/// Where a to-do console keeps its list: the command-line option that chooses the place,
/// and how to open a database there.
///
/// `mirror-todo` uses ``jsonFiles`` (a directory of JSON files on this machine); an
/// executable of another package passes its own, for example one that opens a server by
/// URL, and shares everything else:
///
/// ```swift
/// let server = TodoStorage(
///     option: "--url", placeholder: "URL",
///     help: "the server (default: $MAGICMIRROR_POSTGRES_URL)"
/// ) { url in
///     let database = try await PostgreSQLDatabase(url: url ?? "postgres://localhost/todos")
///     return TodoStorage.Opened(database: database, location: url ?? "localhost") { await database.close() }
/// }
/// await TodoConsole.main(program: "mirror-todo-postgres", storage: server)
/// ```
public struct TodoStorage: Sendable {
    /// A database opened for one command, and what the console says about it.
    public struct Opened: Sendable {
        /// The database the list lives in.
        public var database: any RecordDatabase
        /// Where it is, as `watch` names it: a directory, a server.
        public var location: String
        /// The owner of the private list (`--private`); the operating-system account
        /// running the process when `nil`.
        public var privateUser: MirrorUser?
        /// Called once when the command is done, before the process exits.
        public var close: @Sendable () async -> Void

        /// Describes an opened database.
        ///
        /// - Parameters:
        ///   - database: The database the list lives in.
        ///   - location: Where it is, for messages.
        ///   - privateUser: The owner of the private list; the process's account when `nil`.
        ///   - close: Releases the database when the command is done.
        public init(
            database: any RecordDatabase, location: String, privateUser: MirrorUser? = nil,
            close: @escaping @Sendable () async -> Void = {}
        ) {
            self.database = database
            self.location = location
            self.privateUser = privateUser
            self.close = close
        }
    }

    /// The option that chooses the place, for example `--db`.
    public var option: String
    /// What follows the option in the usage line, for example `DIR`.
    public var placeholder: String
    /// The usage text's description of the option: what the value is and its default, in
    /// lines of at most 60 characters.
    public var help: String
    /// Opens the database; the value given with ``option``, or `nil` when it was not given.
    public var open: @Sendable (_ value: String?) async throws -> Opened
    /// Whether the place a value names holds no database yet, so that `list` prints an
    /// empty list instead of opening (and so creating) one; `false` by default.
    public var holdsNoDatabase: @Sendable (_ value: String?) -> Bool = { _ in false }

    /// Describes where a console keeps its list.
    ///
    /// - Parameters:
    ///   - option: The option that chooses the place, starting with `--`.
    ///   - placeholder: What follows the option in the usage line.
    ///   - help: What the value is and its default, for the usage text.
    ///   - open: Opens the database for a value, or for `nil` when the option was not
    ///     given; what it throws is printed as one line.
    public init(
        option: String, placeholder: String, help: String,
        open: @escaping @Sendable (_ value: String?) async throws -> Opened
    ) {
        self.option = option
        self.placeholder = placeholder
        self.help = help
        self.open = open
    }

    /// A directory of JSON files on this machine: `--db DIR`, by default
    /// `$MAGICMIRROR_DIRECTORY` or the per-user data directory.
    ///
    /// A directory without `database.json`, `public/` or `private/` holds no database yet: `list` says the list is
    /// empty and creates nothing there.
    public static let jsonFiles: TodoStorage = {
        @Sendable func directory(_ path: String?) -> URL {
            path.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? JSONFileDatabase.defaultDirectory
        }
        var storage = TodoStorage(
            option: "--db", placeholder: "DIR",
            help: "the database directory (default: $MAGICMIRROR_DIRECTORY, else\nthe per-user data directory)"
        ) { path in
            Opened(database: try JSONFileDatabase(directory: directory(path)), location: directory(path).path)
        }
        storage.holdsNoDatabase = { path in
            // A file where the directory should be is left to `open`, which says so.
            var isDirectory: ObjCBool = false
            let root = directory(path).path
            guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else { return true }
            return isDirectory.boolValue
                && !["database.json", "public", "private"].contains { FileManager.default.fileExists(atPath: root + "/" + $0) }
        }
        return storage
    }()
}
