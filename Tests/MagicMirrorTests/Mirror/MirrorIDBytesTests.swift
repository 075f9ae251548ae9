import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Ids are compared by their UTF-8 bytes: two spellings of "café" (one code point for `é`,
/// or `e` and a combining accent), equal as Swift strings, are two records everywhere.
@Suite(.timeLimit(.minutes(5))) struct MirrorIDBytesTests {
    let composed = "caf\u{e9}"
    let decomposed = "cafe\u{301}"

    @Test func canonicallyEqualIDsAreTwoRecordsThroughTheMirror() async throws {
        #expect(composed == decomposed)
        let database = try TemporaryDatabase(name: "bytes")
        defer { try? database.remove() }
        let mirror = try await Mirror<Chore>(database: database)
        mirror.dataModel.append(Chore(id: decomposed, title: "decomposed"))
        try await mirror.flush()
        mirror.dataModel.append(Chore(id: composed, title: "composed"))
        #expect(mirror.dataModel.count == 2, "the second spelling was taken for a duplicate")
        try await mirror.flush()
        #expect(mirror.pendingChanges.isEmpty)

        // Edits and lookups by id find the record of that spelling only.
        mirror.dataModel[recordID: composed]?.title = "composed, edited"
        #expect(mirror.dataModel.firstIndex(ofRecordID: decomposed) == 0)
        #expect(mirror.dataModel.firstIndex(ofRecordID: composed) == 1)
        try await mirror.flush()

        let stored = try await database.fetchAll(in: .public(Chore.recordType)).records
        let titles = Dictionary(uniqueKeysWithValues: stored.map { (Array($0.id.utf8), $0) })
        #expect(titles.count == 2)
        let reopened = try await Mirror<Chore>(database: JSONFileDatabase(directory: database.directory))
        let byBytes = reopened.dataModel.map { (Array($0.id.utf8), $0.title) }
        #expect(byBytes.count == 2)
        #expect(byBytes.contains { $0.0 == Array(composed.utf8) && $0.1 == "composed, edited" })
        #expect(byBytes.contains { $0.0 == Array(decomposed.utf8) && $0.1 == "decomposed" })

        // Removing one spelling leaves the other, in the mirror and in the database.
        reopened.dataModel.remove(recordID: decomposed)
        try await reopened.flush()
        let left = try await database.fetchAll(in: .public(Chore.recordType)).records
        #expect(left.map { Array($0.id.utf8) } == [Array(composed.utf8)])
    }

    @Test func anotherProcessesSpellingArrivesAsItsOwnRecord() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Chore>(database: database)
        mirror.dataModel.append(Chore(id: composed, title: "mine"))
        try await mirror.flush()
        try await database.simulateSave(Chore(id: decomposed, title: "theirs"))
        try await mirror.waitUntil(timeout: .seconds(120), "the other spelling to arrive") { $0.count == 2 }
        #expect(Set(mirror.dataModel.map(\.title)) == ["mine", "theirs"])
        #expect(mirror.lastError == nil)
    }

    @Test func aDecomposedRecordTypeIsRefusedWithItsNFCSpelling() async throws {
        let database = InMemoryDatabase()
        let error = await #expect(throws: MirrorError.self) {
            try await database.commit(
                [.save("r", fields: Data("{}".utf8), baseVersion: 0, timestamp: HybridLogicalClock.shared.now())],
                to: .public(decomposed))
        }
        #expect(error?.kind == .invalidName)
        #expect(error?.message.contains("Normalization Form C") == true)
        #expect(error?.nothingStored == true)
    }
}
