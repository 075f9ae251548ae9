import Foundation
import MagicMirror
import Testing

/// The corruption matrix, at the `Mirror` level: files damaged as a crash, a bad disk or a
/// careless hand would, then opened by a new process (an engine of its own) through a
/// mirror. In each case the good records load, the bad bytes are kept in quarantine byte for
/// byte, exactly one error notification is posted per bad entry, and the database stays
/// writable.
///
/// The database-level cases are in `JSONFileRecoveryTests` (torn tail, unfinished commit,
/// corrupt line, damaged end line, many bad lines, bad snapshot record, missing snapshot).
@Suite(.timeLimit(.minutes(10))) struct ReliabilityCorruptionTests {
    let zone = ZoneID.public("Chore")

    /// A database holding `count` chores, each committed alone (one journal line each) by
    /// another writer; compacted first when `compacted`.
    private func populated(
        _ label: String, count: Int = 3
    ) async throws -> (directory: TemporaryDirectory, zoneDirectory: URL, chores: [Chore], writer: JSONFileDatabase) {
        let directory = try TemporaryDirectory(label)
        let writer = try JSONFileDatabase(isolatedDirectory: directory.url)
        let chores = (0..<count).map { Chore(id: "\(label)-\($0)", title: "chore \($0)", rank: $0) }
        for chore in chores { try await seed([chore], into: writer) }
        return (directory, writer.directory(of: zone), chores, writer)
    }

    /// The lines of a journal's data, each with its line feed.
    private func lines(of url: URL) throws -> [Data] {
        let data = try JSONFileTestSupport.journalData(url)
        var result: [Data] = []
        var start = data.startIndex
        while let newline = data[start...].firstIndex(of: 0x0A) {
            result.append(data[start...newline])
            start = newline + 1
        }
        if start < data.endIndex { result.append(data[start...]) }
        return result
    }

    /// Opens the database as a new process would and a mirror on it.
    private func open(_ directory: TemporaryDirectory) async throws -> (JSONFileDatabase, Mirror<Chore>) {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        return (database, try await Mirror<Chore>(database: database))
    }

    /// The mirror commits a new chore; a second mirror on the same database loads without
    /// reporting anything again; a new process sees `expected` plus the new chore.
    private func expectWritable(
        _ mirror: Mirror<Chore>, _ database: JSONFileDatabase, _ directory: TemporaryDirectory,
        expected: [Chore], errors: ErrorNotificationCollector, reported: Int, case label: String = #function
    ) async throws {
        let loaded = mirror.dataModel.count
        let added = Chore(id: "added-\(UUID().uuidString)", title: "after the damage")
        mirror.dataModel.append(added)
        try await flush(mirror)
        let second = try await Mirror<Chore>(database: database)
        #expect(Set(second.dataModel.map(\.id)) == Set(expected.map(\.id) + [added.id]))
        #expect(errors.count == reported, "each bad entry is reported once: \(errors.errors.items)")
        let notifications = errors.count
        // (A new process reports the bad entries again, once, in its own engine.)
        let reader = try JSONFileDatabase(isolatedDirectory: directory.url)
        let stored = try await reader.fetchAll(in: zone).records.map(\.id)
        #expect(Set(stored).isSuperset(of: expected.map(\.id) + [added.id]))
        let zoneDirectory = database.directory(of: zone)
        Reliability.report("corruption-\(label.prefix { $0 != "(" })", [
            "good-records-loaded": loaded, "quarantine-files": JSONFileTestSupport.names(in: zoneDirectory)
                .filter { $0.hasPrefix("quarantine-") }.count,
            "notifications": notifications, "writable-after": Set(stored).contains(added.id),
        ])
    }

    @Test func aTornLastLine() async throws {
        let (directory, zoneDirectory, chores, _) = try await populated("torn")
        defer { directory.remove() }
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        let intact = try JSONFileTestSupport.journalData(journal)
        let torn = Data(#"{"seq":4,"op":"save","id":"torn-3","version":1,"clock":"17952"#.utf8)
        try JSONFileTestSupport.append(torn, to: journal)
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        #expect(mirror.dataModel.map(\.id) == chores.map(\.id))
        #expect(try JSONFileTestSupport.journalData(journal) == intact, "cut back to the last complete line")
        let kept = Reliability.quarantined(in: zoneDirectory, suffix: ".torn")
        #expect(try kept.map { try Data(contentsOf: $0) } == [torn], "kept byte for byte")
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.recordIDs == ["torn-3"])
        try await expectWritable(mirror, database, directory, expected: chores, errors: errors, reported: 1)
    }

    @Test func aGarbageLineInTheMiddle() async throws {
        let (directory, zoneDirectory, chores, _) = try await populated("garbage")
        defer { directory.remove() }
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        var content = try lines(of: journal)
        let garbage = Data("\u{1}garbage {{{ ]] not json at all\n".utf8)
        content[1] = garbage
        try Data(content.joined()).write(to: journal)
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        let good = [chores[0], chores[2]]
        #expect(mirror.dataModel.map(\.id) == good.map(\.id))
        let kept = Reliability.quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [garbage])
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.file == journal.path)
        try await expectWritable(mirror, database, directory, expected: good, errors: errors, reported: 1)
    }

    @Test func invalidUTF8() async throws {
        let (directory, zoneDirectory, chores, _) = try await populated("utf8")
        defer { directory.remove() }
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        var content = try lines(of: journal)
        // "chore 1" becomes "chore \xFF\xFE": bytes that are not UTF-8, inside the fields.
        let text = Array(content[1])
        let title = Array("chore 1".utf8)
        let at = try #require((0...(text.count - title.count)).first { Array(text[$0..<($0 + title.count)]) == title })
        var damaged = text
        damaged.replaceSubrange((at + 6)..<(at + 7), with: [0xFF, 0xFE])
        content[1] = Data(damaged)
        try Data(content.joined()).write(to: journal)
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        let good = [chores[0], chores[2]]
        #expect(mirror.dataModel.map(\.id) == good.map(\.id))
        let kept = Reliability.quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [Data(damaged)], "kept byte for byte")
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.recordIDs == [chores[1].id])
        try await expectWritable(mirror, database, directory, expected: good, errors: errors, reported: 1)
    }

    @Test func fieldsOfTheWrongTypesForTheRecordType() async throws {
        let (directory, zoneDirectory, chores, writer) = try await populated("types")
        defer { directory.remove() }
        // Valid JSON, stored fine, but `title` is a number and `rank` a string: not a Chore.
        let misfit = "types-misfit"
        try await writer.commit([
            .save(misfit, fields: Data(#"{"done":"no","id":"types-misfit","notes":"","rank":"high","title":42}"#.utf8),
                  baseVersion: 0, timestamp: HybridLogicalClock.shared.now()),
        ], to: zone)
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        let line = try #require(try lines(of: journal).last)
        let errors = reliabilityErrors(under: directory.url, orNaming: [misfit])

        let (database, mirror) = try await open(directory)
        #expect(mirror.dataModel.map(\.id) == chores.map(\.id), "the misfit is skipped")
        #expect(errors.errors.items.map(\.kind) == [.decodingFailed])
        let error = try #require(errors.errors.items.first)
        #expect(error.recordIDs == [misfit])
        #expect(error.message.contains("left untouched"))
        #expect(Reliability.quarantined(in: zoneDirectory, suffix: ".bad").isEmpty, "nothing is cut out of the files")
        try await expectWritable(mirror, database, directory, expected: chores, errors: errors, reported: 1)
        // Untouched on disk: the same line, still stored, still version 1.
        #expect(try lines(of: journal).contains(line))
        #expect(try await database.fetch([misfit], in: zone).map(\.version) == [1])
    }

    @Test func duplicateSequenceNumbers() async throws {
        let (directory, zoneDirectory, chores, _) = try await populated("duplicate")
        defer { directory.remove() }
        let journal = zoneDirectory.appendingPathComponent("journal-0.ndjson")
        var content = try lines(of: journal)
        // The third commit claims the second one's sequence number (written by a program
        // that does not know checksums: one that changed a checksummed line is damage).
        let damaged = Data(JSONFileTestSupport.unsealed(String(decoding: content[2], as: UTF8.self))
            .replacingOccurrences(of: #""seq":3"#, with: #""seq":2"#).utf8)
        #expect(damaged != content[2])
        content[2] = damaged
        try Data(content.joined()).write(to: journal)
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        let good = [chores[0], chores[1]]
        #expect(mirror.dataModel.map(\.id) == good.map(\.id))
        let kept = Reliability.quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [damaged], "kept byte for byte")
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.recordIDs == [chores[2].id])
        #expect(errors.errors.items.first?.message.contains("sequence") == true)
        try await expectWritable(mirror, database, directory, expected: good, errors: errors, reported: 1)
        #expect(try await database.currentToken(in: zone).sequence == 3, "numbering goes on after the last good commit")
    }

    @Test func aMissingSnapshotWithItsJournalPresent() async throws {
        let (directory, zoneDirectory, chores, writer) = try await populated("no-snapshot")
        defer { directory.remove() }
        try await writer.compact(zone)
        let later = [Chore(id: "no-snapshot-later", title: "later")]
        try await seed(later, into: writer)
        try FileManager.default.removeItem(at: zoneDirectory.appendingPathComponent("snapshot.json"))
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        #expect(mirror.dataModel.map(\.id) == later.map(\.id), "the journal's records load; the snapshot's are gone")
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.message.contains("missing") == true)
        #expect(chores.count == 3)
        try await expectWritable(mirror, database, directory, expected: later, errors: errors, reported: 1)
        #expect(try await database.currentToken(in: zone).generation == 1, "the journal's generation goes on")
    }

    @Test func aTruncatedSnapshot() async throws {
        let (directory, zoneDirectory, chores, writer) = try await populated("truncated", count: 4)
        defer { directory.remove() }
        try await writer.compact(zone)
        let later = Chore(id: "truncated-later", title: "later")
        try await seed([later], into: writer)
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        let content = try lines(of: snapshot)
        // The header, four records, the footer: cut in the middle of the third record.
        #expect(content.count == 6)
        let partial = content[3].prefix(content[3].count / 2)
        try Data(content[..<3].joined() + partial).write(to: snapshot)
        let errors = reliabilityErrors(under: directory.url)

        let (database, mirror) = try await open(directory)
        let whole = Set(content[1..<3].map { String(decoding: $0, as: UTF8.self) })
        let good = chores.filter { chore in whole.contains { $0.contains("\"\(chore.id)\"") } } + [later]
        #expect(good.count == 3)
        #expect(Set(mirror.dataModel.map(\.id)) == Set(good.map(\.id)))
        let kept = Reliability.quarantined(in: zoneDirectory, suffix: ".bad")
        #expect(try kept.map { try Data(contentsOf: $0) } == [Data(partial)], "kept byte for byte")
        #expect(errors.errors.items.map(\.kind) == [.corruptEntry])
        #expect(errors.errors.items.first?.file == snapshot.path)
        try await expectWritable(mirror, database, directory, expected: good, errors: errors, reported: 1)
    }

    @Test func anUnknownFormatVersionIsRefusedAndTheFilesAreUntouched() async throws {
        let (directory, zoneDirectory, _, writer) = try await populated("format")
        defer { directory.remove() }
        try await writer.compact(zone)
        let errors = reliabilityErrors(under: directory.url)

        // A snapshot written by a later version.
        let snapshot = zoneDirectory.appendingPathComponent("snapshot.json")
        let text = try String(contentsOf: snapshot, encoding: .utf8)
        try Data(text.replacingOccurrences(of: #"{"format":1,"#, with: #"{"format":2,"#).utf8).write(to: snapshot)
        let before = try Reliability.picture(of: directory.url)
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        do {
            _ = try await Mirror<Chore>(database: database)
            Issue.record("a mirror opened a zone in format 2")
        } catch let error as MirrorError {
            #expect(error.kind == .unsupportedFormat)
            #expect(error.message.contains("format 2"))
            #expect(error.message.contains("Nothing was changed"))
            #expect(error.file == snapshot.path)
        }
        await #expect(throws: MirrorError.self) {
            try await database.commit([jsonSave("format-new", ["v": 1])], to: zone)
        }
        #expect(try Reliability.picture(of: directory.url) == before, "byte for byte as they were")

        // A database written by a later version (this one creates format 2).
        let manifest = directory.url.appendingPathComponent("database.json")
        let manifestText = try String(contentsOf: manifest, encoding: .utf8)
        #expect(manifestText.contains(#""format":2"#))
        try Data(manifestText.replacingOccurrences(of: #""format":2"#, with: #""format":3"#).utf8).write(to: manifest)
        let refused = try Reliability.picture(of: directory.url)
        do {
            _ = try JSONFileDatabase(isolatedDirectory: directory.url)
            Issue.record("a database in format 3 was opened")
        } catch let error as MirrorError {
            #expect(error.kind == .unsupportedFormat)
            #expect(error.message.contains("format 3"))
            #expect(error.file == manifest.path)
        }
        let unchanged = try Reliability.picture(of: directory.url) == refused
        #expect(unchanged, "byte for byte as they were")
        #expect(errors.count == 0, "a refusal is thrown, not posted")
        Reliability.report("corruption-anUnknownFormatVersion", [
            "refused": "snapshot and database.json", "files-unchanged": unchanged, "notifications": errors.count,
        ])
    }
}
