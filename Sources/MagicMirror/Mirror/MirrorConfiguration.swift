/// Tuning for how a ``Mirror`` commits its changes, and the user session a private mirror
/// follows.
///
/// The defaults suit applications; tests shorten ``retryDelay`` so retries happen quickly:
///
/// ```swift
/// let mirror = try await Mirror<Todo>(
///     database: database,
///     configuration: MirrorConfiguration(retryDelay: .milliseconds(5)))
/// ```
public struct MirrorConfiguration: Sendable {
    /// How long to wait before the first retry of a commit that failed transiently. Each
    /// further consecutive failure doubles the wait, up to ``maximumRetryDelay``.
    public var retryDelay: Duration
    /// The longest wait between retries.
    public var maximumRetryDelay: Duration
    /// The most changes committed together in one batch.
    public var maximumBatchSize: Int
    /// The session whose current user a private mirror opened without a `user:` holds and
    /// follows across user switches. Default: ``UserSession/shared``.
    public var userSession: UserSession
    /// Seals the records of a private mirror so that only the holder of its keys can read
    /// them; `nil` (the default) stores them open. See <doc:EncryptingPrivateRecords>.
    ///
    /// A mirror refuses a cipher (``MirrorError/Kind/unsupported``) in the public scope, and
    /// in a private mirror that follows a ``UserSession`` rather than one named `user:`.
    public var cipher: (any RecordCipher)?
    /// What the mirror does with stored records that do not decode as its record type:
    /// ``UndecodableRecordPolicy/skip`` by default (listed in ``Mirror/skippedRecords``,
    /// reported, and written to standard error in debug builds), or
    /// ``UndecodableRecordPolicy/fail`` to make opening throw.
    public var undecodableRecords: UndecodableRecordPolicy

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - retryDelay: The wait before the first retry; 100 ms by default.
    ///   - maximumRetryDelay: The longest wait between retries; 30 s by default.
    ///   - maximumBatchSize: The most changes per commit; 500 by default.
    ///   - userSession: The session a private mirror follows; ``UserSession/shared`` by
    ///     default.
    ///   - cipher: Seals a private mirror's records; `nil` (stored open) by default.
    ///   - undecodableRecords: What to do with stored records that do not decode;
    ///     ``UndecodableRecordPolicy/skip`` by default.
    public init(
        retryDelay: Duration = .milliseconds(100),
        maximumRetryDelay: Duration = .seconds(30),
        maximumBatchSize: Int = 500,
        userSession: UserSession = .shared,
        cipher: (any RecordCipher)? = nil,
        undecodableRecords: UndecodableRecordPolicy = .skip
    ) {
        self.retryDelay = retryDelay
        self.maximumRetryDelay = max(maximumRetryDelay, retryDelay)
        self.maximumBatchSize = max(1, maximumBatchSize)
        self.userSession = userSession
        self.cipher = cipher
        self.undecodableRecords = undecodableRecords
    }

    /// Doublings past this many failures in a row change nothing (the delay reached its
    /// maximum long before), so the count stops there.
    private static var doublingsCounted: Int { 40 }

    /// The wait before retry number `failures` (1 for the first retry).
    package func delay(afterFailures failures: Int) -> Duration {
        var delay = retryDelay
        for _ in 1..<max(1, min(failures, Self.doublingsCounted)) {
            delay *= 2
            if delay >= maximumRetryDelay { return maximumRetryDelay }
        }
        return min(delay, maximumRetryDelay)
    }
}
