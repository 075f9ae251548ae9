import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import Testing

/// Private mirrors with a cipher in real processes (`mirror-worker sealed`, which seals with
/// `InsecureTestCipher`) on one JSON-file database: the files hold no plaintext, a wrong key
/// overwrites nothing, records written before and after a key rotation open, and two
/// processes' edits of different fields of one record are merged.
@Suite(.timeLimit(.minutes(5))) struct SealedRecordProcessTests {
    static let zone = ZoneID.private("Note", user: "ann")

    /// Every stored `Note`, by id: its key id and its open fields (opened with `cipher`).
    private func stored(
        in directory: TemporaryDirectory, cipher: InsecureTestCipher
    ) async throws -> [String: (keyID: String?, fields: [String: String])] {
        let database = try JSONFileDatabase(isolatedDirectory: directory.url)
        let coder = SchemaCoder<SealedRecordTests.Note>(cipher: cipher)
        var result: [String: (String?, [String: String])] = [:]
        for record in try await database.fetchAll(in: Self.zone).records {
            guard let fields = record.fields else { continue }
            let envelope = try #require(try JSONSerialization.jsonObject(with: fields) as? [String: Any])
            let open = try #require(try JSONSerialization.jsonObject(with: try coder.opened(fields)) as? [String: Any])
            result[record.id] = (envelope["$key"] as? String, open.mapValues { "\($0)" })
        }
        return result
    }

    /// The bytes of every file under `directory`.
    private func everyFile(in directory: TemporaryDirectory) throws -> [(path: String, bytes: Data)] {
        let walker = try #require(FileManager.default.enumerator(at: directory.url, includingPropertiesForKeys: nil))
        var files: [(String, Data)] = []
        while let url = walker.nextObject() as? URL {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
            else { continue }
            files.append((url.path, try Data(contentsOf: url)))
        }
        return files
    }

    @Test func theFilesHoldCiphertextOnly() async throws {
        let directory = try TemporaryDirectory("sealed-files")
        defer { directory.remove() }
        let ann = try await MirrorProcess(sealedBy: "ann", key: "k1:ann's secret", directory: directory)
        try await ann.send("add n1 Zanzibar-title-0451")
        try await ann.send("body n1 pineapple-body-7713")
        try await ann.send("add n2 second-title-9902")
        try await ann.send("flush")
        #expect(try await ann.quit() == 0)

        let files = try everyFile(in: directory)
        #expect(files.contains { $0.bytes.range(of: Data("\"$sealed\"".utf8)) != nil }, "\(files.map(\.path))")
        for (path, bytes) in files {
            for secret in ["Zanzibar", "pineapple", "second-title", "\"title\"", "\"body\""] {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(path) holds \(secret)")
            }
        }
        let notes = try await stored(in: directory, cipher: InsecureTestCipher(keyID: "k1", secret: "ann's secret"))
        #expect(notes["n1"]?.fields == ["id": "n1", "title": "Zanzibar-title-0451", "body": "pineapple-body-7713"])
        #expect(notes["n2"]?.fields["title"] == "second-title-9902")
    }

    @Test func aWrongKeyInAnotherProcessIsReportedAndOverwritesNothing() async throws {
        let directory = try TemporaryDirectory("sealed-wrong-key")
        defer { directory.remove() }
        let ann = try await MirrorProcess(sealedBy: "ann", key: "k1:ann's secret", directory: directory)
        try await ann.send("add n1 kept")
        try await ann.send("flush")
        #expect(try await ann.quit() == 0)
        let before = try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: Self.zone).records

        let intruder = try await MirrorProcess(sealedBy: "intruder", key: "k1:a guess", directory: directory)
        try await intruder.lines.wait("the error of the record that does not open") { lines in
            lines.contains { $0.hasPrefix("error ") && $0.contains("n1") && $0.contains("sealed with key \"k1\"") }
        }
        try await intruder.waitForState("no record") { $0.isEmpty }
        // A record of the same id, made with the wrong key, is held and stores nothing.
        intruder.process.write("add n1 overwritten\n")
        await #expect(throws: MirrorError.self) { try await intruder.send("flush") }
        #expect(try await intruder.quit() == 0)
        let after = try await JSONFileDatabase(isolatedDirectory: directory.url).fetchAll(in: Self.zone).records
        #expect(after == before)

        let reopened = try await MirrorProcess(sealedBy: "ann", key: "k1:ann's secret", directory: directory)
        try await reopened.waitForState("ann's record") { $0.map { $0["title"] } == ["kept"] }
        #expect(!reopened.lines.items.contains { $0.hasPrefix("error ") }, "\(reopened.lines.items)")
        #expect(try await reopened.quit() == 0)
    }

    @Test func recordsWrittenBeforeAndAfterAKeyRotationOpen() async throws {
        let directory = try TemporaryDirectory("sealed-rotation")
        defer { directory.remove() }
        let before = try await MirrorProcess(sealedBy: "before", key: "k1:old secret", directory: directory)
        try await before.send("add n1 one")
        try await before.send("add n2 two")
        try await before.send("flush")
        #expect(try await before.quit() == 0)

        // The rotated cipher seals with k2 and still opens k1.
        let rotated = try await MirrorProcess(
            sealedBy: "rotated", key: "k2:new secret", directory: directory, ["--older", "k1:old secret"])
        try await rotated.waitForState("the records sealed before the rotation") { $0.count == 2 }
        try await rotated.send("title n1 one, edited")
        try await rotated.send("add n3 three")
        try await rotated.send("flush")
        let both = InsecureTestCipher(keyID: "k2", secret: "new secret", olderKeys: ["k1": "old secret"])
        var notes = try await stored(in: directory, cipher: both)
        #expect(notes.mapValues(\.keyID) == ["n1": "k2", "n2": "k1", "n3": "k2"], "re-sealed on write only")
        #expect(notes.mapValues { $0.fields["title"] } == ["n1": "one, edited", "n2": "two", "n3": "three"])

        // An old process still holding k1 only reads what is still sealed with it.
        let old = try await MirrorProcess(sealedBy: "old", key: "k1:old secret", directory: directory)
        try await old.waitForState("the record still sealed with k1") { $0.map { $0["id"] } == ["n2"] }
        #expect(try await old.quit() == 0)

        // migrateStoredRecords seals the rest with k2; then k1 can go.
        try await rotated.send("migrate")
        #expect(rotated.migratedCount == 1)
        notes = try await stored(in: directory, cipher: both)
        #expect(notes.mapValues(\.keyID) == ["n1": "k2", "n2": "k2", "n3": "k2"])
        #expect(try await rotated.quit() == 0)
        let newOnly = try await MirrorProcess(sealedBy: "new", key: "k2:new secret", directory: directory)
        try await newOnly.waitForState("every record") { $0.count == 3 }
        #expect(!newOnly.lines.items.contains { $0.hasPrefix("error ") }, "\(newOnly.lines.items)")
        #expect(try await newOnly.quit() == 0)
    }

    @Test func twoProcessesEditDifferentFieldsOfOneSealedRecord() async throws {
        let directory = try TemporaryDirectory("sealed-merge")
        defer { directory.remove() }
        let a = try await MirrorProcess(sealedBy: "a", key: "k1:shared secret", directory: directory)
        try await a.send("add n1 original")
        try await a.send("flush")
        let b = try await MirrorProcess(sealedBy: "b", key: "k1:shared secret", directory: directory)
        try await b.waitForState("the record") { $0.count == 1 }

        // Each edits its own field, again and again, at once: their commits meet in
        // conflicts that the default policy merges field by field, on open fields.
        async let titles: Void = {
            for round in 1...15 {
                try await a.send("title n1 title \(round)")
                if round % 3 == 0 { try await a.send("flush") }
            }
            try await a.send("flush")
        }()
        async let bodies: Void = {
            for round in 1...15 {
                try await b.send("body n1 body \(round)")
                if round % 3 == 0 { try await b.send("flush") }
            }
            try await b.send("flush")
        }()
        _ = try await (titles, bodies)

        for process in [a, b] {
            try await process.waitForState("both last edits") { records in
                records.map { "\($0["title"]!)|\($0["body"]!)" } == ["title 15|body 15"]
            }
            #expect(!process.lines.items.contains { $0.hasPrefix("error ") }, "\(process.lines.items)")
        }
        let notes = try await stored(in: directory, cipher: InsecureTestCipher(keyID: "k1", secret: "shared secret"))
        #expect(notes["n1"]?.fields["title"] == "title 15")
        #expect(notes["n1"]?.fields["body"] == "body 15")
        #expect(try await a.quit() == 0)
        #expect(try await b.quit() == 0)
    }
}

extension MirrorProcess {
    /// Starts `mirror-worker sealed` for user `ann`, sealing with `key` (`ID:SECRET`).
    convenience init(
        sealedBy name: String, key: String, directory: TemporaryDirectory, _ arguments: [String] = []
    ) async throws {
        try await self.init(name, command: "sealed", directory: directory, ["--user", "ann", "--key", key] + arguments)
    }
}
