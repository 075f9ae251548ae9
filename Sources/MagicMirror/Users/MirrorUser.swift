import Foundation

/// The identity of a user of a database: whose private scope a mirror reads and writes.
///
/// By default it is the operating-system account running the process
/// (``processOwner()``); give one explicitly to act for another user, for example the user
/// a server request is authenticated as:
///
/// ```swift
/// let alice = try MirrorUser(name: "alice")
/// let status = await alice.verifyAccountAuthentication(in: database)
/// ```
///
/// A user name becomes a directory name in the JSON-file database
/// (`<root>/private/<user>/`), so it must be a valid name: not empty, at most 255 bytes,
/// no `/` or NUL, not `.` or `..`, in Unicode normalization form C.
///
/// The process's current user is the ``UserSession/user`` of a ``UserSession``
/// (``UserSession/shared`` unless you make your own): the one place to read and switch it.
public struct MirrorUser: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The user's name, as used for the private scope's zones (``ZoneID/private(_:user:)-(_,MirrorUser)``).
    public let name: String

    /// A user with a given name.
    ///
    /// - Parameter name: The user's name.
    /// - Throws: ``MirrorError/Kind/invalidName`` when the name is not a valid name.
    public init(name: String) throws(MirrorError) {
        try NameRules.check(name, as: "user name", scope: .private)
        self.name = name
    }

    /// The operating-system account running this process.
    ///
    /// Its name is the password database's entry for the effective user id, or `$USER`
    /// when there is none (for example a container user without an `/etc/passwd` line),
    /// or `uid-<number>` when neither is known or valid as a name.
    public static func processOwner() -> MirrorUser { ownerOfProcess }

    private static let ownerOfProcess: MirrorUser = {
        if let name = CurrentUser.accountName(), let user = try? MirrorUser(name: name) { return user }
        return MirrorUser(validName: "uid-\(geteuid())")
    }()

    private init(validName: String) { name = validName }


    public var description: String { name }

    /// Decodes a user from its name, a JSON string.
    ///
    /// - Throws: `DecodingError` when the name is not valid.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        do {
            try self.init(name: name)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    /// Encodes the user as its name, a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

// MARK: - Verifying the private scope

extension MirrorUser {
    /// Whether a user can reach their private scope in a database.
    public enum AccountStatus: Sendable, CustomStringConvertible {
        /// The private scope can be read and written.
        case available
        /// The private scope cannot be reached; the error, of kind
        /// ``MirrorError/Kind/accountUnavailable``, says why and carries the database's own
        /// error as its ``MirrorError/underlying`` error.
        case unavailable(MirrorError)

        /// Whether the status is ``available``.
        public var isAvailable: Bool {
            if case .available = self { return true }
            return false
        }

        public var description: String {
            switch self {
            case .available: return "available"
            case .unavailable(let error): return "unavailable: \(error.message)"
            }
        }
    }

    /// The record type of the zone that ``verifyAccountAuthentication(in:)`` reads in a
    /// database that is not ``AccountVerifiable``. Nothing is written to it.
    public static let probeRecordType = "MagicMirrorAccountProbe"

    /// Checks that this user can reach their private scope in `database`.
    ///
    /// A database that is ``AccountVerifiable`` runs its own check (the JSON-file database:
    /// the user's private directory exists or can be made with mode 0700, is owned by the
    /// process's user id, and can be read and written). Any other database is asked for the
    /// token of a zone of the user's private scope (``probeRecordType``); the scope is
    /// available when that succeeds.
    ///
    /// The check reports; it does not post a `.mirrorError` notification.
    ///
    /// - Parameter database: The database whose private scope to check.
    /// - Returns: ``AccountStatus/available``, or ``AccountStatus/unavailable(_:)`` with an
    ///   ``MirrorError/Kind/accountUnavailable`` error that says why.
    public func verifyAccountAuthentication(in database: any RecordDatabase) async -> AccountStatus {
        do {
            if let verifiable = database as? any AccountVerifiable {
                try await verifiable.verifyPrivateScope(of: self)
            } else {
                _ = try await database.currentToken(in: .private(Self.probeRecordType, user: name))
            }
            return .available
        } catch {
            let cause = error as? MirrorError
            return .unavailable(MirrorError(
                .accountUnavailable,
                "the private scope of user \(String(reflecting: name)) cannot be reached: "
                    + (cause?.message ?? "\(error)"),
                scope: .private, file: cause?.file, underlying: error))
        }
    }
}
