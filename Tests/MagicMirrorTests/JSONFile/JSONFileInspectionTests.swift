import Foundation
import MagicMirror
import Testing

/// `JSONFileInspection` (what `mirror-db` reads) finds exactly what the engine's recovery on
/// open then reports, loads the same records, and changes no byte.
@Suite(.timeLimit(.minutes(5))) struct JSONFileInspectionTests {
    let zone = ZoneID.public("Todo")

    @Test func inspectionAgreesWithRecoveryAndWritesNothing() async throws {
        let directory = try TemporaryDirectory("inspection")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<3 { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        try await db.compact(zone)
        try await db.commit([jsonSave("r3", ["n": 3])], to: zone)
        let zoneDirectory = db.directory(of: zone)
        let journal = zoneDirectory.appendingPathComponent("journal-1.ndjson")
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")

        // A bad snapshot line, a bad journal line inside a complete append, a commit that
        // repeats a sequence number, and an unfinished write at the end.
        var snapshotLines = try String(contentsOf: snapshot, encoding: .utf8).components(separatedBy: "\n")
        snapshotLines.insert("{not a record},", at: 1)
        try snapshotLines.joined(separator: "\n").write(to: snapshot, atomically: false, encoding: .utf8)
        let firstLine = try #require(JSONFileTestSupport.journalText(journal).split(separator: "\n").first)
        let repeated = JSONFileTestSupport.unsealed(String(firstLine)).replacingOccurrences(of: "\"id\":\"r3\"", with: "\"id\":\"r9\"")
        let extra = #"{"seq":90,"op":"save","id":"r4","version":1,"clock":"1763703120123-0","writer":"w-x","end":true,"fields":{"n":4}}"#
        try JSONFileTestSupport.append(Array("garbage\n\(extra)\n\(repeated)\n{\"seq\":91,\"op".utf8), to: journal)
        let before = try JSONFileTestSupport.names(in: zoneDirectory).map {
            try Data(contentsOf: zoneDirectory.appendingPathComponent($0))
        }

        let listed = JSONFileInspection.zones(in: directory.url.path)
        #expect(listed.zones.map(\.0) == [zone])
        #expect(listed.problems.isEmpty)
        let inspected = JSONFileInspection.inspect(zone, at: zoneDirectory.path)
        #expect(inspected.problems.map(\.kind) == ["bad-snapshot-line", "bad-line", "repeated-sequence", "torn-tail"])
        #expect(inspected.generation == 1)
        #expect(JSONFileInspection.checkDatabaseFile(in: directory.url.path) == nil)
        let after = try JSONFileTestSupport.names(in: zoneDirectory).map {
            try Data(contentsOf: zoneDirectory.appendingPathComponent($0))
        }
        #expect(after == before, "inspection wrote nothing")

        // Recovery on open reports the same four problems and loads the same records.
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let loaded = try await reopened.fetchAll(in: zone).records
        #expect(reopened.problems.count == inspected.problems.count, "\(reopened.problems)")
        #expect(Set(loaded.map(\.id)) == Set(inspected.liveRecords.map(\.id)))
        // In creation order: r4's hand-written clock is older than the others'.
        #expect(inspected.liveRecords.map(\.id) == ["r4", "r0", "r1", "r2", "r3"])
    }

    @Test func aMissingSnapshotAndAnUnreadableDatabaseFileAreProblems() async throws {
        let directory = try TemporaryDirectory("inspection-missing")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("r0", ["n": 0])], to: zone)
        try await db.compact(zone)
        try await db.commit([jsonSave("r1", ["n": 1])], to: zone)
        try FileManager.default.removeItem(at: db.directory(of: zone).appendingPathComponent("snapshot.json"))
        try Data("{}".utf8).write(to: directory.url.appendingPathComponent("database.json"))

        let inspected = JSONFileInspection.inspect(zone, at: db.directory(of: zone).path)
        #expect(inspected.problems.map(\.kind) == ["missing-snapshot"])
        #expect(inspected.liveRecords.map(\.id) == ["r1"])
        #expect(JSONFileInspection.checkDatabaseFile(in: directory.url.path)?.message.contains("no format version") == true)
    }
}
