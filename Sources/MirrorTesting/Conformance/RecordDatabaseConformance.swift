import Foundation
import MagicMirror

/// The implementation requirements of `RecordDatabase`, as a list of checks that any
/// test target runs on its own database.
///
/// Every database, the ones MagicMirror ships and any adapter of yours, runs the same
/// checks. Each ``ConformanceCheck`` opens a fresh database with the factory you give it,
/// exercises one requirement of the protocol's list (the number is
/// ``ConformanceCheck/requirement``), and throws a ``ConformanceFailure`` that says what
/// went wrong. MirrorTesting imports neither XCTest nor Testing, so run the list with the
/// framework you use. With Swift Testing, one test per check:
///
/// ```swift
/// import MirrorTesting
/// import Testing
///
/// @Suite struct MyDatabaseConformanceTests {
///     @Test(arguments: RecordDatabaseConformance.checks)
///     func conforms(to check: ConformanceCheck) async throws {
///         try await check.run {
///             let database = try await MyDatabase.openFresh()
///             return DatabaseUnderTest(
///                 database: database,
///                 otherWriter: { try await MyDatabase.open(like: database) },
///                 startNewGeneration: { zone in try await database.dropHistory(of: zone) },
///                 cleanup: { await database.destroy() })
///         }
///     }
/// }
/// ```
public enum RecordDatabaseConformance {
    /// Every check, in the order of the requirements they cover.
    public static var checks: [ConformanceCheck] {
        namesAndFields + idsAreBytes + versionsAndConflicts + atomicity + tokens + notifications + threads
    }
}

/// A fresh database a ``ConformanceCheck`` runs on, with what the check needs around it.
public struct DatabaseUnderTest: Sendable {
    /// The database the check uses; empty when made.
    public var database: any RecordDatabase
    /// Opens another writer over the same stored data, with its own
    /// `RecordDatabase.writerID`, as another process would.
    public var otherWriter: @Sendable () async throws -> any RecordDatabase
    /// Rewrites a zone's history so that tokens taken before are of an older generation
    /// (compaction, for example, or the server's data replaced by a copy). Tombstones may
    /// go.
    public var startNewGeneration: @Sendable (ZoneID) async throws -> Void
    /// Releases the database and whatever holds its data; called once when the check ends,
    /// whether it passed or not.
    public var cleanup: @Sendable () async -> Void

    /// Describes a database for the conformance checks.
    ///
    /// - Parameters:
    ///   - database: A fresh, empty database.
    ///   - otherWriter: Opens a second writer over the same data.
    ///   - startNewGeneration: Starts a new generation of a zone's history.
    ///   - cleanup: Removes the database; called once at the end of the check.
    public init(
        database: any RecordDatabase,
        otherWriter: @escaping @Sendable () async throws -> any RecordDatabase,
        startNewGeneration: @escaping @Sendable (ZoneID) async throws -> Void,
        cleanup: @escaping @Sendable () async -> Void = {}
    ) {
        self.database = database
        self.otherWriter = otherWriter
        self.startNewGeneration = startNewGeneration
        self.cleanup = cleanup
    }
}

/// One named check of ``RecordDatabaseConformance``.
public struct ConformanceCheck: Sendable, CustomStringConvertible {
    /// A sentence naming the behaviour checked, for example
    /// `"stale base versions conflict with the current record"`.
    public let name: String
    /// The number of the `RecordDatabase` requirement the check covers, or `nil` for a
    /// behaviour outside the numbered list.
    public let requirement: Int?
    private let body: @Sendable (DatabaseUnderTest) async throws -> Void

    init(
        _ name: String, requirement: Int?,
        _ body: @escaping @Sendable (DatabaseUnderTest) async throws -> Void
    ) {
        self.name = name
        self.requirement = requirement
        self.body = body
    }

    /// Runs the check on a fresh database.
    ///
    /// - Parameter makeDatabase: Opens a fresh, empty database; called once.
    /// - Throws: A ``ConformanceFailure`` when the database breaks the requirement, or the
    ///   error the database or `makeDatabase` threw.
    public func run(_ makeDatabase: @Sendable () async throws -> DatabaseUnderTest) async throws {
        let subject = try await makeDatabase()
        do {
            try await body(subject)
        } catch {
            await subject.cleanup()
            throw error
        }
        await subject.cleanup()
    }

    public var description: String {
        requirement.map { "\($0). \(name)" } ?? name
    }
}

/// What a ``ConformanceCheck`` throws when a database breaks a requirement.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// What was expected and what happened instead.
    public let message: String
    /// Where in the check the expectation was written.
    public let file: String
    /// The line of the expectation.
    public let line: Int

    public var description: String { "\(message) (\(file):\(line))" }
}

// MARK: - Writing checks

/// Throws a ``ConformanceFailure`` unless `condition` holds.
func expect(
    _ condition: Bool, _ message: @autoclosure () -> String,
    file: String = #fileID, line: Int = #line
) throws(ConformanceFailure) {
    guard condition else { throw ConformanceFailure(message: message(), file: file, line: line) }
}

/// Throws a ``ConformanceFailure`` unless `actual == expected`.
func expectEqual<Value: Equatable>(
    _ actual: Value, _ expected: Value, _ what: @autoclosure () -> String,
    file: String = #fileID, line: Int = #line
) throws(ConformanceFailure) {
    guard actual == expected else {
        throw ConformanceFailure(
            message: "\(what()): expected \(expected), got \(actual)", file: file, line: line)
    }
}

/// Runs `body`, which must throw a `MirrorError`; returns it. (The suite reports through
/// ``ConformanceFailure`` rather than Swift Testing's issues, so that it runs under any test
/// framework; the package's own tests have a Swift Testing counterpart.)
@discardableResult
func expectMirrorError(
    _ what: @autoclosure () -> String, file: String = #fileID, line: Int = #line,
    _ body: () async throws -> Void
) async throws -> MirrorError {
    do {
        try await body()
    } catch let error as MirrorError {
        return error
    } catch {
        throw ConformanceFailure(
            message: "\(what()): threw \(error), which is not a MirrorError", file: file, line: line)
    }
    throw ConformanceFailure(message: "\(what()) was accepted", file: file, line: line)
}

/// A clock reading for a new operation.
func now() -> HLCTimestamp { HybridLogicalClock.shared.now() }

/// The fields of a small JSON object, with sorted keys.
func fields(_ object: [String: any Sendable]) -> Data {
    // Only dictionaries of numbers and strings are passed: serialization cannot fail.
    (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
}

/// An integer field of stored fields.
func field(_ name: String, of data: Data?) -> Int? {
    guard let data, let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
        return nil
    }
    return object[name] as? Int
}

/// A save of `object`, based on `base`.
func save(_ id: String, _ object: [String: any Sendable], base: Int = 0) -> RecordOperation {
    .save(id, fields: fields(object), baseVersion: base, timestamp: now())
}

/// The record an applied result stored; throws for any other result.
func applied(
    _ result: CommitOutcome.Result?, file: String = #fileID, line: Int = #line
) throws(ConformanceFailure) -> StoredRecord {
    guard case .applied(let record) = result else {
        throw ConformanceFailure(
            message: "expected an applied result, got \(result.map { "\($0)" } ?? "none")",
            file: file, line: line)
    }
    return record
}

/// The current record of a conflict result; throws for any other result.
func conflict(
    _ result: CommitOutcome.Result?, file: String = #fileID, line: Int = #line
) throws(ConformanceFailure) -> StoredRecord? {
    guard case .conflict(let current) = result else {
        throw ConformanceFailure(
            message: "expected a conflict, got \(result.map { "\($0)" } ?? "none")",
            file: file, line: line)
    }
    return current
}
