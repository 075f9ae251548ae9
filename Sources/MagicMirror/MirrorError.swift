import Foundation

/// An error raised or reported by MagicMirror.
///
/// Every failure in MagicMirror is a `MirrorError`: thrown from the awaited calls
/// (``RecordDatabase`` methods, `Mirror.flush()`), and, for work that runs in the
/// background, posted once as a notification named `.mirrorError` with the error as its
/// `object`.
///
/// A `MirrorError` carries its ``kind``, a human-readable ``message`` and whatever context
/// is known: the ``recordIDs`` involved, the ``recordType``, the ``scope``, the ``file``
/// and the ``underlying`` error.
///
/// Each kind has one spelling, a static member of ``Kind``: compare ``kind`` with it, or
/// use it as a `catch` pattern:
///
/// ```swift
/// do {
///     try await database.commit(operations, to: zone)
/// } catch MirrorError.Kind.invalidName {
///     print("bad name")
/// } catch let error as MirrorError where error.kind.isTransient {
///     print("try again later: \(error.message)")
/// }
/// ```
///
/// Kinds are static members over an internal code rather than a public enum, so new kinds
/// can be added without breaking exhaustive `switch` statements in your code.
///
/// ## Where failures go, and which to use
///
/// A failure of something you await is thrown to you. A failure of the background work (a
/// commit that failed, a pull, a stored record that does not decode) is reported once, in
/// three places at the same time; pick the one that fits what you do with it:
///
/// | To… | Use | What it is |
/// |---|---|---|
/// | handle a failure of a call | `do`/`catch` around `try await` (``Mirror/flush()``, opening a ``Mirror``, ``RecordDatabase`` calls) | the failure of that call |
/// | show a mirror's state in a UI | ``Mirror/lastError`` (with ``Mirror/pendingChanges`` and ``Mirror/skippedRecords``) | the most recent failure of that mirror; `Observable`, never cleared |
/// | react to every failure of one mirror, in order | ``Mirror/errors()`` | an `AsyncStream` per call, from the call on |
/// | log every failure of the process in one place | the `Notification` named `.mirrorError`, whose `object` is the error | every mirror's failures and those of work without a mirror (a ``JSONFileDatabase`` repairing a file, a ``ReplicatedDatabase`` exchanging), posted once per failure even when several mirrors find it |
///
/// A failure that stands for a bad stored entry (a record that does not decode, a corrupt
/// line) is posted once per process but reaches the ``Mirror/errors()`` and
/// ``Mirror/lastError`` of every mirror that finds it. In tests, MirrorTesting's
/// `ErrorNotificationRecorder` collects the notifications.
public struct MirrorError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in one of a small set of categories.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        package enum Code: String, Sendable {
            case invalidName
            case invalidRecord
            case conflict
            case corruptEntry
            case decodingFailed
            case encodingFailed
            case unsupportedFormat
            case ioFailure
            case diskFull
            case permissionDenied
            case readOnly
            case unavailable
            case notFound
            case accountUnavailable
            case cancelled
            case timedOut
            case unsupported
            case refused
        }

        package let code: Code

        package init(_ code: Code) { self.code = code }

        /// A record type, user name or record id that cannot be used as a name (empty,
        /// longer than 255 bytes, containing `/` or NUL, `.` or `..`, not in Unicode
        /// normalization form C), or a zone whose scope and owner disagree (a user given
        /// with the public scope, none with the private scope).
        public static let invalidName = Kind(.invalidName)
        /// A record or operation that the database refuses (for example a save whose fields
        /// are not a JSON object).
        public static let invalidRecord = Kind(.invalidRecord)
        /// A change was based on a version of a record that is no longer current, and could not
        /// be settled. A commit reports its conflicts as results
        /// (``CommitOutcome/Result``), not as this error, and a mirror settles them with its
        /// ``ConflictPolicy``; a ``ReplicatedDatabase`` reports this kind for a pushed change
        /// that conflicts while no mirror of its record type is open to settle it.
        public static let conflict = Kind(.conflict)
        /// A stored entry (a journal line, a snapshot) that cannot be read. Its bytes are kept
        /// in quarantine; everything else loads.
        public static let corruptEntry = Kind(.corruptEntry)
        /// A stored record that no longer decodes as the record type (the type changed).
        /// The record is skipped and left untouched in the database.
        public static let decodingFailed = Kind(.decodingFailed)
        /// A record that could not be encoded as a JSON object.
        public static let encodingFailed = Kind(.encodingFailed)
        /// The database was written in a format version this library does not know.
        /// Nothing is modified.
        public static let unsupportedFormat = Kind(.unsupportedFormat)
        /// A read, write, flush or rename failed (for example `EIO`).
        public static let ioFailure = Kind(.ioFailure)
        /// The disk is full (`ENOSPC`, `EDQUOT`).
        public static let diskFull = Kind(.diskFull)
        /// The process may not read or write a file (`EACCES`, `EPERM`).
        public static let permissionDenied = Kind(.permissionDenied)
        /// The database or its file system is read-only (`EROFS`).
        public static let readOnly = Kind(.readOnly)
        /// The database cannot be reached for now.
        public static let unavailable = Kind(.unavailable)
        /// Something that was expected to exist does not.
        public static let notFound = Kind(.notFound)
        /// The current user's account or private scope cannot be reached.
        public static let accountUnavailable = Kind(.accountUnavailable)
        /// The work was cancelled.
        public static let cancelled = Kind(.cancelled)
        /// Waiting for something took longer than allowed.
        public static let timedOut = Kind(.timedOut)
        /// The database does not offer what was asked (for example assets, on a database
        /// that does not store them).
        public static let unsupported = Kind(.unsupported)
        /// The database refused a change by a rule of its own, for every writer alike (for
        /// example a delete that a relationship's delete rule denies, or an edit of a record
        /// shared read-only), or a mirror refused an edit that would overwrite a stored record
        /// it skips because it does not decode (see ``Mirror/skippedRecords``). Nothing of the
        /// commit was stored.
        ///
        /// A mirror drops the refused changes, the records named in ``MirrorError/recordIDs``,
        /// and shows them as stored again: the error is reported once, and the `flush()` calls
        /// that waited for them throw it once the records show again (when none waited, the
        /// next `flush()` throws it). Changes of the same batch that were not refused are sent
        /// again.
        public static let refused = Kind(.refused)

        /// Whether retrying the same operation later may succeed.
        ///
        /// Disk-full, I/O, permission, read-only, unavailable and time-out failures are
        /// transient: the condition can clear without the operation changing. Invalid names,
        /// invalid records, encoding failures and unsupported formats are not.
        public var isTransient: Bool {
            switch code {
            case .ioFailure, .diskFull, .permissionDenied, .readOnly, .unavailable, .timedOut,
                 .accountUnavailable:
                return true
            case .invalidName, .invalidRecord, .conflict, .corruptEntry, .decodingFailed,
                 .encodingFailed, .unsupportedFormat, .notFound, .cancelled, .unsupported, .refused:
                return false
            }
        }

        public var description: String { code.rawValue }

        /// Whether an error is a ``MirrorError`` of this kind; lets
        /// `catch MirrorError.Kind.diskFull` work.
        public static func ~= (kind: Kind, error: any Error) -> Bool {
            (error as? MirrorError)?.kind == kind
        }
    }

    /// The category of the failure.
    public var kind: Kind
    /// A sentence that says what went wrong, for people.
    public var message: String
    /// The ids of the records involved, if any.
    public var recordIDs: [String]
    /// The record type involved, if known.
    public var recordType: String?
    /// The scope involved, if known.
    public var scope: Scope?
    /// The file involved, if any.
    public var file: String?
    /// The error that caused this one, if any (for example a `POSIXError` or a
    /// `DecodingError`).
    public var underlying: (any Error)?

    /// Whether the failed call is known to have stored nothing.
    ///
    /// A database sets it on an error thrown from ``RecordDatabase/commit(_:to:)`` when it
    /// refused the commit before writing anything: an invalid name or operation, a database
    /// it cannot open or that is read-only. `false` (the default) means the commit may have
    /// been stored anyway, for example when the disk failed after the bytes reached it or a
    /// server's connection dropped before its answer came.
    ///
    /// A mirror uses it to know what a failed change may have left behind: a record created,
    /// refused with `nothingStored`, then removed from `dataModel` is simply forgotten, while
    /// one that may have been stored is deleted from the database to be sure.
    public var nothingStored = false

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - kind: The category of the failure.
    ///   - message: A sentence that says what went wrong.
    ///   - recordIDs: The ids of the records involved.
    ///   - recordType: The record type involved.
    ///   - scope: The scope involved.
    ///   - file: The path of the file involved.
    ///   - underlying: The error that caused this one.
    public init(
        _ kind: Kind,
        _ message: String,
        recordIDs: [String] = [],
        recordType: String? = nil,
        scope: Scope? = nil,
        file: String? = nil,
        underlying: (any Error)? = nil
    ) {
        self.kind = kind
        self.message = message
        self.recordIDs = recordIDs
        self.recordType = recordType
        self.scope = scope
        self.file = file
        self.underlying = underlying
    }

    public var description: String {
        var parts = ["MirrorError.\(kind): \(message)"]
        if let recordType { parts.append("record type: \(recordType)") }
        if let scope { parts.append("scope: \(scope)") }
        if !recordIDs.isEmpty {
            let shown = recordIDs.prefix(5).joined(separator: ", ")
            parts.append("records: \(shown)\(recordIDs.count > 5 ? ", … (\(recordIDs.count))" : "")")
        }
        if let file { parts.append("file: \(file)") }
        if let underlying { parts.append("underlying: \(underlying)") }
        return parts.joined(separator: "; ")
    }

    /// Returns a copy with context filled in where it is still missing.
    package func adding(
        recordIDs: [String]? = nil,
        recordType: String? = nil,
        scope: Scope? = nil,
        file: String? = nil
    ) -> MirrorError {
        var copy = self
        if copy.recordIDs.isEmpty, let recordIDs { copy.recordIDs = recordIDs }
        if copy.recordType == nil { copy.recordType = recordType }
        if copy.scope == nil { copy.scope = scope }
        if copy.file == nil { copy.file = file }
        return copy
    }

    /// Runs `body`, which stores nothing when it fails, marking what it throws
    /// ``nothingStored``.
    package static func beforeStoring<T>(_ body: () throws(MirrorError) -> T) throws(MirrorError) -> T {
        do {
            return try body()
        } catch {
            var failure = error
            failure.nothingStored = true
            throw failure
        }
    }

    /// Makes an error from a failed system call's `errno`, choosing the kind from it:
    /// `ENOSPC`/`EDQUOT` → ``Kind/diskFull``, `EACCES`/`EPERM` → ``Kind/permissionDenied``,
    /// `EROFS` → ``Kind/readOnly``, anything else → ``Kind/ioFailure``.
    package static func posix(_ code: Int32, _ operation: String, file: String? = nil) -> MirrorError {
        let kind: Kind
        switch code {
        case ENOSPC, EDQUOT: kind = .diskFull
        case EACCES, EPERM: kind = .permissionDenied
        case EROFS: kind = .readOnly
        default: kind = .ioFailure
        }
        let reason = String(cString: strerror(code))
        return MirrorError(
            kind, "\(operation) failed: \(reason)", file: file,
            underlying: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
    }
}

extension Notification.Name {
    /// Posted once for every failure MagicMirror reports; the notification's `object` is the
    /// ``MirrorError``.
    public static let mirrorError = Notification.Name("MagicMirror.mirrorError")
}
