import Foundation
import MagicMirror
import Synchronization

/// A `JSONFileDatabase` in a fresh temporary directory, removed afterwards: for tests that
/// need the real files (their format, their durability, other processes), where an
/// ``InMemoryDatabase`` would not do.
///
/// A `TemporaryDatabase` is itself a `RecordDatabase` that forwards every call to its
/// ``database`` — and an `AssetDatabase`, a `RelationshipDatabase` and a `SharingDatabase`,
/// as the JSON-file database is — so hand it to the code under test as you would the
/// JSON-file database:
///
/// ```swift
/// let database = try TemporaryDatabase()
/// let mirror = try await Mirror<SampleRecord>(database: database)
/// mirror.dataModel.append(SampleRecord(title: "Milk"))
/// try await mirror.flush()
/// print(database.directory.path)   // public/SampleRecord/journal-….ndjson, …
/// ```
///
/// The directory is removed when ``remove()`` is called, or else when the
/// `TemporaryDatabase` is deallocated, that is once nothing uses it any more: every mirror
/// holds the database it was opened on, so a mirror opened on the `TemporaryDatabase` keeps
/// the directory until it goes away itself. To scope a database to a block, use
/// ``withTemporaryDatabase(options:isolation:_:)``.
///
/// Commits are `JSONFileDatabase.Durability.relaxed` by default: written to the operating
/// system but not flushed with `fsync`, which makes tests several times faster and loses
/// nothing unless the machine loses power, which a test's temporary files need not survive.
/// Pass options with `JSONFileDatabase.Durability.durable` to test code that depends on
/// the flush.
///
/// > Important: Hand the `TemporaryDatabase` itself to mirrors, not its ``database``. A
/// > mirror opened on ``database`` does not keep the `TemporaryDatabase` alive, and its
/// > directory may then be removed while the mirror still uses it.
public final class TemporaryDatabase: RecordDatabase {
    /// The database's directory: a new directory in the system's temporary directory.
    public let directory: URL
    /// The JSON-file database in ``directory``, for what only it offers (for example
    /// `JSONFileDatabase.compact(_:)` and `JSONFileDatabase.problems`).
    public let database: JSONFileDatabase
    /// Whether ``directory`` was removed already.
    private let removed = Mutex(false)

    /// The options a temporary database is opened with unless told otherwise: those of
    /// `JSONFileDatabase.Options`, with `JSONFileDatabase.Durability.relaxed` commits.
    public static var defaultOptions: JSONFileDatabase.Options {
        JSONFileDatabase.Options(durability: .relaxed)
    }

    /// Creates a fresh directory in the system's temporary directory and opens a
    /// `JSONFileDatabase` in it.
    ///
    /// - Parameters:
    ///   - name: A word to put in the directory's name, to recognise it (for example the
    ///     test's name); the name also holds a new UUID, so it is unique anyway. Only
    ///     letters, digits, `-` and `_` are kept.
    ///   - options: How the database behaves; ``defaultOptions`` (relaxed durability) by
    ///     default.
    /// - Throws: A `MirrorError` when the directory cannot be created or the database not
    ///   opened; nothing is left behind then.
    public init(name: String = "database", options: JSONFileDatabase.Options = TemporaryDatabase.defaultOptions) throws {
        let allowed = name.unicodeScalars.filter {
            CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_"
        }
        let word = String(String.UnicodeScalarView(allowed.prefix(64)))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "MirrorTesting-\(word.isEmpty ? "database" : word)-\(UUID().uuidString)", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw MirrorError(
                .ioFailure, "cannot create the temporary database directory \(directory.path): \(error)",
                file: directory.path, underlying: error)
        }
        do {
            self.database = try JSONFileDatabase(directory: directory, options: options)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.directory = database.directory
    }

    deinit {
        try? remove()
    }

    /// Removes ``directory`` and everything in it. Calling it again does nothing.
    ///
    /// Call it once nothing uses the database any more: a mirror still open on it would
    /// fail to commit afterwards.
    ///
    /// - Throws: `MirrorError.Kind.ioFailure` when the directory cannot be removed.
    public func remove() throws {
        let first = removed.withLock { removed in
            defer { removed = true }
            return !removed
        }
        guard first else { return }
        do {
            try FileManager.default.removeItem(at: directory)
        } catch let error as CocoaError where error.code == .fileNoSuchFile {
            return
        } catch {
            throw MirrorError(
                .ioFailure, "cannot remove the temporary database directory \(directory.path): \(error)",
                file: directory.path, underlying: error)
        }
    }

    /// Whether ``remove()`` was called (or the directory was removed by ``withTemporaryDatabase(options:isolation:_:)``).
    public var isRemoved: Bool { removed.withLock { $0 } }

    // MARK: RecordDatabase

    /// The identifier of ``database``.
    public var identifier: String { database.identifier }

    /// The writer id of ``database``.
    public var writerID: String { database.writerID }

    /// Commits through ``database`` (see `RecordDatabase.commit(_:to:)`).
    @discardableResult
    public func commit(_ operations: [RecordOperation], to zone: ZoneID) async throws -> CommitOutcome {
        try await database.commit(operations, to: zone)
    }

    /// Reads through ``database`` (see `RecordDatabase.fetchAll(in:)`).
    public func fetchAll(in zone: ZoneID) async throws -> ChangeSet {
        try await database.fetchAll(in: zone)
    }

    /// Reads through ``database`` (see `RecordDatabase.fetch(_:in:)`).
    public func fetch(_ recordIDs: [String], in zone: ZoneID) async throws -> [StoredRecord] {
        try await database.fetch(recordIDs, in: zone)
    }

    /// Reads through ``database`` (see `RecordDatabase.changes(in:since:)`).
    public func changes(in zone: ZoneID, since token: ChangeToken) async throws -> ChangeSet {
        try await database.changes(in: zone, since: token)
    }

    /// Reads through ``database`` (see `RecordDatabase.currentToken(in:)`).
    public func currentToken(in zone: ZoneID) async throws -> ChangeToken {
        try await database.currentToken(in: zone)
    }

    /// Subscribes through ``database`` (see `RecordDatabase.subscribe(to:handler:)`).
    public func subscribe(
        to zone: ZoneID, handler: @escaping @Sendable (RemoteNotification) -> Void
    ) throws -> MirrorCancellable {
        try database.subscribe(to: zone, handler: handler)
    }
}

/// Runs `body` with a ``TemporaryDatabase`` and removes its directory when `body` returns
/// or throws.
///
/// ```swift
/// try await withTemporaryDatabase { database in
///     let mirror = try await Mirror<SampleRecord>(database: database)
///     mirror.dataModel.append(SampleRecord(title: "Milk"))
///     try await mirror.flush()
/// }
/// ```
///
/// - Parameters:
///   - options: How the database behaves; ``TemporaryDatabase/defaultOptions`` (relaxed
///     durability) by default.
///   - isolation: The actor `body` runs on: the caller's, so that a test on the main actor
///     can use main-actor state in `body`.
///   - body: The code that uses the database. Let go of the mirrors it opens before it
///     returns: the directory is removed then, whatever still uses it.
/// - Returns: What `body` returns.
/// - Throws: What `body` throws, or a `MirrorError` when the database cannot be created.
///   A failure to remove the directory afterwards is not thrown (it would hide the
///   result); it is left in the system's temporary directory.
public func withTemporaryDatabase<Result>(
    options: JSONFileDatabase.Options = TemporaryDatabase.defaultOptions,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (TemporaryDatabase) async throws -> Result
) async throws -> Result {
    let database = try TemporaryDatabase(options: options)
    defer { try? database.remove() }
    return try await body(database)
}
