import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Makes a fresh, empty database of one implementation for one test, so the shared
/// conformance suite runs every scenario against every ``RecordDatabase`` the package ships.
struct DatabaseFactory: Sendable, CustomTestStringConvertible {
    let name: String
    /// Returns a fresh database and a second writer over the same data (as another process
    /// would be), in a directory (if any) that `cleanup` removes.
    let make: @Sendable () async throws -> Opened

    struct Opened: Sendable {
        let database: any RecordDatabase
        /// Another writer over the same stored data, with its own writer id.
        let otherWriter: @Sendable () async throws -> any RecordDatabase
        /// Drops tombstones and history, starting a new generation.
        let compact: @Sendable (ZoneID) async throws -> Void
        let cleanup: @Sendable () -> Void
    }

    var testDescription: String { name }

    static let inMemory = DatabaseFactory(name: "InMemoryDatabase") {
        let database = InMemoryDatabase()
        return Opened(
            database: database,
            otherWriter: { database.writer(named: "other-" + UUID().uuidString.prefix(6)) },
            compact: { database.compact($0) },
            cleanup: {})
    }

    static let jsonFile = DatabaseFactory(name: "JSONFileDatabase") {
        let directory = try TemporaryDirectory("conformance")
        let database = try JSONFileDatabase(directory: directory.url)
        return Opened(
            database: database,
            otherWriter: { try JSONFileDatabase(isolatedDirectory: directory.url) },
            compact: { try await database.compact($0) },
            cleanup: { directory.remove() })
    }

    /// Every implementation the conformance suite checks.
    static let all: [DatabaseFactory] = [.inMemory, .jsonFile]
}

/// A temporary directory removed by `remove()`.
struct TemporaryDirectory: Sendable {
    let url: URL

    init(_ label: String = "test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("magicmirror-\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Encodes a small JSON object for tests.
func fields(_ object: [String: any Sendable]) -> Data {
    try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
}

/// Decodes fields back into a dictionary for assertions.
func object(_ data: Data?) -> NSDictionary? {
    guard let data else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? NSDictionary
}
