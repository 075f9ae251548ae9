/// How a ``Mirror`` settles a conflict: a local change to a record that another writer
/// changed since the version the local change was based on.
///
/// A delete always wins over a concurrent edit, whatever the policy: a record deleted
/// elsewhere while edited here stays deleted, and a record deleted here while edited
/// elsewhere is deleted. A record created here with the id of one deleted elsewhere is
/// created again. The policy decides only when both sides saved the record:
///
/// - ``changedKeys`` (the default): a three-way merge by top-level field against the
///   version both sides started from. A field changed only here keeps the local value, a
///   field changed only elsewhere keeps the remote one, and a field changed on both sides
///   goes to the later writer. When the merged fields do not decode as `Record`, the whole
///   record of the later writer wins.
/// - ``lastWriterWins``: the whole record of the later writer.
/// - ``serverWins``: the stored record; the local change is dropped.
/// - ``custom(_:)``: your closure returns the record to keep.
///
/// Writers are ordered by the hybrid-logical-clock reading of their change and then by
/// writer id, so clock skew between processes cannot reorder them.
///
/// ```swift
/// mirror.conflictPolicy = .custom { base, local, remote in
///     var merged = remote
///     merged.tags = Array(Set(local.tags).union(remote.tags))
///     return merged
/// }
/// ```
public struct ConflictPolicy<Record: Recordable>: Sendable {
    enum Strategy: Sendable {
        case changedKeys
        case lastWriterWins
        case serverWins
        case custom(@Sendable (_ base: Record?, _ local: Record, _ remote: Record) -> Record)
    }

    let strategy: Strategy

    private init(_ strategy: Strategy) { self.strategy = strategy }

    /// Merge by top-level field against the common base; the later writer wins a field
    /// both sides changed. The default.
    public static var changedKeys: ConflictPolicy { ConflictPolicy(.changedKeys) }

    /// The whole record of the later writer wins.
    public static var lastWriterWins: ConflictPolicy { ConflictPolicy(.lastWriterWins) }

    /// The stored record wins; the local change is dropped.
    public static var serverWins: ConflictPolicy { ConflictPolicy(.serverWins) }

    /// Your closure decides.
    ///
    /// The closure runs on a background task, once per conflicting record, and must not
    /// block. It gets the version both sides started from (`nil` when there is none, for
    /// example when both created the record, or when it no longer decodes), the local
    /// record and the stored one, and returns the record to keep, which is then committed
    /// (unless it equals the stored one). A stored record that no longer decodes as
    /// `Record` is not passed to the closure: the change stays pending and
    /// ``MirrorError/Kind/decodingFailed`` is reported.
    ///
    /// - Parameter resolve: Returns the record to keep from `(base, local, remote)`.
    public static func custom(
        _ resolve: @escaping @Sendable (_ base: Record?, _ local: Record, _ remote: Record) -> Record
    ) -> ConflictPolicy {
        ConflictPolicy(.custom(resolve))
    }
}
