import Foundation
import MirrorTestSupport
import Testing

@testable import MagicMirror

/// Whatever a writer may commit, every reader reads: the extreme values of the clocks, the
/// longest id and a large record, committed by one process and read back by another, from
/// the journal and again from a snapshot. (A clock of 19 digits was acknowledged but read
/// by nobody: every reader took its line for an unfinished append, and the next commit cut
/// it off as torn.)
@Suite(.timeLimit(.minutes(5))) struct JSONFileExtremeValuesTests {
    let zone = ZoneID.public("Todo")

    @Test func everyValueAWriterMayCommitIsReadByAnotherProcess() async throws {
        let directory = try TemporaryDirectory("extreme-values")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url)
        let clocks: [(id: String, clock: HLCTimestamp)] = [
            ("latest", HLCTimestamp(millis: .max, counter: .max)),
            ("earliest", HLCTimestamp(millis: .min, counter: 0)),
            ("before-1970", HLCTimestamp(millis: -1, counter: .max)),
            ("zero", .zero),
        ]
        for (id, clock) in clocks {
            try await database.commit([.save(id, fields: fields(["n": 1]), baseVersion: 0, timestamp: clock)], to: zone)
        }
        let longestID = String(repeating: "i", count: 255)
        let large = fields(["text": String(repeating: "x", count: 4_000_000)])
        try await database.commit(
            [.save(longestID, fields: large, baseVersion: 0, timestamp: HybridLogicalClock.shared.now())], to: zone)
        // A commit after them: the lines before it must not be taken for a torn append.
        try await database.commit([jsonSave("after", ["n": 2])], to: zone)

        for source in ["journal", "snapshot"] {
            if source == "snapshot" { try await database.compact(zone) }
            let run = try await MirrorWorkerRun.run(["read", "--db", directory.path])
            let lines = run.standardOutput.split(separator: "\n").map(String.init)
            for (id, clock) in clocks {
                #expect(lines.contains("\(id) 1 \(clock) \(clock) 7"), "\(source): \(id) in \(lines.map { $0.prefix(80) })")
            }
            #expect(lines.contains { $0.hasPrefix("\(longestID) 1 ") && $0.hasSuffix(" \(large.count)") }, "\(source)")
            #expect(lines.contains { $0.hasPrefix("after 1 ") }, "\(source)")
            #expect(lines.last == "problems 0", "\(source): \(run.standardError)")
        }
        #expect(database.problems.isEmpty, "\(database.problems)")
    }

    /// A record stored at the last version, by another program (or, on PostgreSQL, by a role
    /// writing SQL): a change to it is stored, at that version, where one up from it trapped.
    @Test func aRecordAtTheLastVersionStillTakesChanges() async throws {
        let directory = try TemporaryDirectory("last-version")
        defer { directory.remove() }
        let other = try await databaseAfterAnotherProgramAppended(
            #"{"seq":2,"op":"save","id":"last","version":9223372036854775807,"clock":"1-0","writer":"w-other","end":true,"fields":{"n":2}}"#, in: directory)
        let stored = try #require(try await other.fetch(["last"], in: zone).first)
        #expect(stored.version == .max)
        let outcome = try await other.commit(
            [.save("last", fields: fields(["n": 3]), baseVersion: .max, timestamp: HybridLogicalClock.shared.now())],
            to: zone)
        #expect(outcome.isApplied)
        let changed = try #require(try await other.fetch(["last"], in: zone).first)
        #expect(changed.version == .max)
        #expect(object(changed.fields)?["n"] as? Int == 3)
    }

    /// A journal that another program wrote up to the last commit sequence: the next commit
    /// is refused with an error that names the zone, and what is stored stays readable,
    /// where one up from the last sequence trapped.
    @Test func aZoneAtTheLastSequenceRefusesTheNextCommit() async throws {
        let directory = try TemporaryDirectory("last-sequence")
        defer { directory.remove() }
        let other = try await databaseAfterAnotherProgramAppended(
            #"{"seq":9223372036854775807,"op":"save","id":"last","version":1,"clock":"1-0","writer":"w-other","end":true,"fields":{"n":2}}"#, in: directory)
        await #expect {
            try await other.commit([jsonSave("next", ["n": 3])], to: zone)
        } throws: { error in
            let error = error as? MirrorError
            return error?.kind == .refused && error?.message.contains("last commit sequence") == true
                && error?.recordIDs == ["next"]
        }
        let stored = try await other.fetch(["first", "last", "next"], in: zone)
        #expect(stored.map(\.id) == ["first", "last"])
    }

    /// A database whose zone holds record `first`, to which another program then appended
    /// `line`, opened afresh in `directory`.
    private func databaseAfterAnotherProgramAppended(
        _ line: String, in directory: TemporaryDirectory
    ) async throws -> JSONFileDatabase {
        let database = try JSONFileDatabase(directory: directory.url)
        try await database.commit([jsonSave("first", ["n": 1])], to: zone)
        let journal = try JSONFileTestSupport.journal(in: database.directory(of: zone))
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line.utf8 + [UInt8(ascii: "\n")]))
        try handle.close()
        return try JSONFileDatabase(isolatedDirectory: directory.url)
    }
}
