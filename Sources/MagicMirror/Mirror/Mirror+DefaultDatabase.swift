import Foundation

extension Mirror {
    /// Opens a mirror on the embedded default database and loads it.
    ///
    /// The database is the ``JSONFileDatabase`` in ``JSONFileDatabase/defaultDirectory``:
    /// `$MAGICMIRROR_DIRECTORY` when set, otherwise a per-user data directory
    /// (`~/.local/share/magicmirror` on Linux, `~/Library/Application Support/MagicMirror` on
    /// macOS). It is created when missing. Every mirror opened this way in a process shares
    /// one database instance.
    ///
    /// ```swift
    /// struct Todo: Recordable {
    ///     var id = UUID()
    ///     var title: String
    /// }
    ///
    /// let todos = try await Mirror<Todo>()
    /// todos.dataModel.append(Todo(title: "Buy milk"))
    /// try await todos.flush()
    /// ```
    ///
    /// - Parameters:
    ///   - scope: The scope of the records; ``Scope/public`` by default.
    ///   - user: The owner of the private zone to mirror, for the private scope only; the
    ///     current user of ``MirrorConfiguration/userSession`` by default (see
    ///     ``init(database:scope:user:conflictPolicy:configuration:)``).
    ///   - conflictPolicy: How concurrent changes to one record are resolved;
    ///     ``ConflictPolicy/changedKeys`` by default.
    ///   - configuration: Retry and batching settings.
    /// - Throws: A ``MirrorError`` when the directory cannot be created or opened, or a name
    ///   is invalid.
    public convenience init(
        scope: Scope = .public,
        user: MirrorUser? = nil,
        conflictPolicy: ConflictPolicy<Record> = .changedKeys,
        configuration: MirrorConfiguration = MirrorConfiguration()
    ) async throws {
        let database = try JSONFileDatabase(directory: JSONFileDatabase.defaultDirectory)
        try await self.init(
            database: database, scope: scope, user: user, conflictPolicy: conflictPolicy,
            configuration: configuration)
    }
}
