import Foundation
import MagicMirror
import Testing

/// Recovery on open: torn tails and unfinished commits are cut back, undecodable entries
/// are quarantined byte for byte, reported once and skipped; the database always opens.
@Suite(.timeLimit(.minutes(5))) struct JSONFileRecoveryTests {
    let zone = ZoneID.public("Todo")

    /// Writes `commits` one-record commits (`r0`, `r1`, …) and returns the database and
    /// the zone directory.
    private func populate(_ directory: TemporaryDirectory, commits: Int) async throws -> (JSONFileDatabase, URL) {
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        for index in 0..<commits { try await db.commit([jsonSave("r\(index)", ["n": index])], to: zone) }
        return (db, db.directory(of: zone))
    }

    private func quarantined(in zoneDirectory: URL, suffix: String) -> [URL] {
        JSONFileTestSupport.names(in: zoneDirectory)
            .filter { $0.hasPrefix("quarantine-") && $0.hasSuffix(suffix) }
            .map { zoneDirectory.appendingPathComponent($0) }
    }

    @Test func aTornTailIsCutBackAndKeptInQuarantine() async throws {
        let directory = try TemporaryDirectory("torn")
        defer { directory.remove() }
        let (_, zoneDirectory) = try await populate(directory, commits: 2)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        let intact = try JSONFileTestSupport.journalData(journal)
        let torn = Array(#"{"seq":3,"op":"save","id":"r2","version":1,"clo"#.utf8)
        try JSONFileTestSupport.append(torn, to: journal)
        let errors = MirrorErrorCollector(under: directory.url)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["r0", "r1"])
        #expect(try JSONFileTestSupport.journalData(journal) == intact, "the torn bytes are cut back to the last newline")
        let kept = quarantined(in: zoneDirectory, suffix: ".torn")
        #expect(kept.count == 1)
        #expect(try kept.first.map { try Data(contentsOf: $0) } == Data(torn), "kept byte for byte")
        #expect(reopened.problems.count == 1)
        #expect(reopened.problems.first?.kind == .corruptEntry)
        #expect(reopened.problems.first?.file?.hasSuffix("journal-0.ndjson") == true)
        #expect(reopened.problems.first?.recordIDs == ["r2"])
        #expect(errors.all.count == 1)

        // The journal is appendable and every line parses.
        try await reopened.commit([jsonSave("r2", ["n": 2])], to: zone)
        _ = try await reopened.fetchAll(in: zone)
        reopened.catchUp(zone)
        #expect(try JSONFileTestSupport.jsonLines(journal).map { $0["id"] as? String } == ["r0", "r1", "r2"])
        #expect(errors.all.count == 1, "reported exactly once")
    }

    @Test func anUnfinishedCommitIsNeverPartlyApplied() async throws {
        let directory = try TemporaryDirectory("unfinished")
        defer { directory.remove() }
        let (db, zoneDirectory) = try await populate(directory, commits: 2)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        let intact = try JSONFileTestSupport.journalData(journal)
        // An append of two commits (3: x and y, 4: z) whose writer died before its last
        // line, the only one marked "end".
        let clock = HybridLogicalClock.shared.now()
        let unfinished = Array((
            #"{"seq":3,"op":"save","id":"x","version":1,"clock":"\#(clock)","writer":"dead","fields":{}}"# + "\n"
                + #"{"seq":3,"op":"save","id":"y","version":1,"clock":"\#(clock)","writer":"dead","fields":{}}"# + "\n"
                + #"{"seq":4,"op":"save","id":"z","version":1,"clock":"\#(clock)","writer":"dead","fields":{}}"# + "\n"
        ).utf8)
        try JSONFileTestSupport.append(unfinished, to: journal)

        // A reader that takes no lock applies nothing of it.
        db.catchUp(zone)
        #expect(try await db.fetch(["x", "y", "z"], in: zone).isEmpty)
        #expect(try await db.currentToken(in: zone).sequence == 2)

        // Opening cuts it off and keeps it.
        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetch(["x", "y", "z"], in: zone).isEmpty)
        #expect(try JSONFileTestSupport.journalData(journal) == intact)
        let kept = quarantined(in: zoneDirectory, suffix: ".torn")
        #expect(try kept.map { try Data(contentsOf: $0) } == [Data(unfinished)])
        let next = try await reopened.commit([jsonSave("w", ["v": 1])], to: zone)
        #expect(next.token.sequence == 3)
        #expect(try JSONFileTestSupport.jsonLines(journal).count == 3)
    }

    @Test func aCorruptLineIsQuarantinedByteForByteReportedOnceAndSkipped() async throws {
        let directory = try TemporaryDirectory("corrupt")
        defer { directory.remove() }
        let (_, zoneDirectory) = try await populate(directory, commits: 3)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        // Damage the middle line in place: `"version":1` becomes `"version":X`.
        var lines = try JSONFileTestSupport.journalText(journal).split(separator: "\n", omittingEmptySubsequences: false)
        lines[1] = Substring(lines[1].replacingOccurrences(of: #""version":1"#, with: #""version":X"#))
        let damagedLine = Data((lines[1] + "\n").utf8)
        try Data(lines.joined(separator: "\n").utf8).write(to: journal)
        let errors = MirrorErrorCollector(under: directory.url)

        let reopened = try JSONFileDatabase(directory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["r0", "r2"])
        let kept = quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [damagedLine])
        let problem = try #require(reopened.problems.first)
        #expect(problem.kind == .corruptEntry)
        #expect(problem.recordIDs == ["r1"])
        #expect(problem.recordType == "Todo")
        #expect(problem.file?.hasSuffix("/public/Todo/journal-0.ndjson") == true)
        #expect(errors.all.count == 1)

        // Reading again, another instance on the directory, and another writer's commit
        // (which makes this one catch up) report nothing new.
        let again = try JSONFileDatabase(directory: directory.url)
        _ = try await again.fetchAll(in: zone)
        let other = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await other.commit([jsonSave("r3", ["n": 3])], to: zone)
        reopened.catchUp(zone)
        #expect(try await reopened.fetch(["r3"], in: zone).count == 1)
        #expect(reopened.problems.count == 1)
        #expect(errors.all.count == 2, "once for this process's engine, once for the other writer's")
        #expect(quarantined(in: zoneDirectory, suffix: ".bad").count == 1, "quarantined once")
    }

    /// A damaged line sets its whole append aside (a commit is applied whole or not at
    /// all), and the appends before and after it are applied.
    @Test func aDamagedEndLineDoesNotHideTheCommitsAroundIt() async throws {
        let directory = try TemporaryDirectory("lost-end")
        defer { directory.remove() }
        let db = try JSONFileDatabase(isolatedDirectory: directory.url)
        try await db.commit([jsonSave("z", ["v": 1])], to: zone)
        try await db.commit([jsonSave("a", ["v": 1]), jsonSave("b", ["v": 1])], to: zone)
        try await db.commit([jsonSave("c", ["v": 1])], to: zone)
        let journal = db.directory(of: zone).appendingPathComponent("journal-0.ndjson")
        var text = try JSONFileTestSupport.journalText(journal)
        // Damage the line that ends the first commit.
        text = text.replacingOccurrences(of: #""id":"b","version":1"#, with: #""id":"b","version":#"#)
        try Data(text.utf8).write(to: journal)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["z", "c"])
        #expect(Set(reopened.problems.flatMap(\.recordIDs)) == ["a", "b"], "both lines of the commit, reported")
        #expect(reopened.problems.count == 2)
    }

    @Test func aDatabaseWithManyBadLinesStillOpens() async throws {
        let directory = try TemporaryDirectory("many-bad")
        defer { directory.remove() }
        let (_, zoneDirectory) = try await populate(directory, commits: 50)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        var lines = try JSONFileTestSupport.journalText(journal).split(separator: "\n").map(String.init)
        for index in stride(from: 5, to: 50, by: 10) { lines[index] = "garbage \(index) {{{" }
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: journal)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        let all = try await reopened.fetchAll(in: zone)
        #expect(all.records.count == 45)
        #expect(!all.records.contains { ["r5", "r15", "r25", "r35", "r45"].contains($0.id) })
        #expect(reopened.problems.count == 5)
        #expect(quarantined(in: zoneDirectory, suffix: ".bad").count == 5)
    }

    @Test func aBadSnapshotRecordIsQuarantinedAndTheRestLoads() async throws {
        let directory = try TemporaryDirectory("bad-snapshot")
        defer { directory.remove() }
        let (db, zoneDirectory) = try await populate(directory, commits: 3)
        try await db.compact(zone)
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        var lines = try String(contentsOf: snapshot, encoding: .utf8).split(separator: "\n").map(String.init)
        let index = try #require(lines.firstIndex { $0.contains(#""id":"r1""#) })
        lines[index] = lines[index].replacingOccurrences(of: #""version":1"#, with: #""version":"#)
        let damaged = Data((lines[index] + "\n").utf8)
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: snapshot)

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(Set(try await reopened.fetchAll(in: zone).records.map(\.id)) == ["r0", "r2"])
        let kept = quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [damaged])
        #expect(reopened.problems.first?.file?.hasSuffix("snapshot.json") == true)
    }

    @Test func aMissingSnapshotOfACompactedZoneIsReportedAndItsJournalStillLoads() async throws {
        let directory = try TemporaryDirectory("missing-snapshot")
        defer { directory.remove() }
        let (db, zoneDirectory) = try await populate(directory, commits: 2)
        try await db.compact(zone)
        try await db.commit([jsonSave("later", ["v": 1])], to: zone)
        try FileManager.default.removeItem(at: zoneDirectory.appendingPathComponent("snapshot.json"))

        let reopened = try JSONFileDatabase(isolatedDirectory: directory.url)
        #expect(try await reopened.fetchAll(in: zone).records.map(\.id) == ["later"])
        #expect(try await reopened.currentToken(in: zone).generation == 1)
        #expect(reopened.problems.count == 1)
        #expect(reopened.problems.first?.message.contains("missing") == true)
    }
}
