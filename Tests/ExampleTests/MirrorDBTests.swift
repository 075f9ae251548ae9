import Foundation
import MirrorTestSupport
import Testing

/// Runs the built `mirror-db` as a user would, on databases that `mirror-todo` wrote.
@Suite(.timeLimit(.minutes(5))) struct MirrorDBTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String

        var json: Any? { try? JSONSerialization.jsonObject(with: Data(stdout.utf8)) }
    }

    private func db(_ arguments: [String]) async throws -> Run {
        let (termination, stdout, stderr) = try await Subprocess.run(BuiltProducts.executable("mirror-db"), arguments)
        return Run(status: termination.status, stdout: stdout, stderr: stderr)
    }

    /// A database with "Buy milk" (done) and a removed item, written by `mirror-todo`.
    private func makeDatabase() async throws -> TemporaryFolder {
        let folder = try TemporaryFolder()
        for arguments in [["add", "Buy milk"], ["add", "Call mum"], ["done", "1"], ["remove", "2"]] {
            let result = try await Todo.run(["--db", folder.path] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        return folder
    }

    private func journal(_ folder: TemporaryFolder) -> String { folder.path + "/public/Todo/journal-0.ndjson" }

    /// Writes `text` where the journal's data ends (over the spaces a writer reserved at its
    /// end), as a writer appends.
    private func append(_ text: String, to path: String) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        while data.last == UInt8(ascii: " ") { data.removeLast() }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(data.count))
        try handle.write(contentsOf: Data(text.utf8))
    }

    @Test func showListsTheRecordsWithReadableDates() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let shown = try await db(["show", folder.path])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("public/Todo: 1 record\n"), "\(shown.stdout)")
        #expect(shown.stdout.contains(#"title: "Buy milk""#))
        #expect(shown.stdout.contains("done: true"))
        // The `created` field, seconds since 2001 in the file, is shown as a date.
        let year = Calendar(identifier: .gregorian).component(.year, from: Date())
        #expect(shown.stdout.contains("created: \(year)-"), "\(shown.stdout)")
        #expect(shown.stderr.isEmpty, "no progress when standard error is not a terminal: \(shown.stderr)")

        let json = try await db(["--json", "show", folder.path, "Todo"])
        let zones = try #require(json.json as? [[String: Any]], "\(json.stdout)")
        let records = try #require(zones.first?["records"] as? [[String: Any]])
        #expect(records.count == 1)
        let fields = try #require(records.first?["fields"] as? [String: Any])
        #expect(fields["title"] as? String == "Buy milk")
        let dates = try #require(records.first?["fieldDates"] as? [String: String])
        #expect(dates["created"]?.hasPrefix("\(year)-") == true)

        let other = try await db(["--json", "show", folder.path, "Nothing"])
        #expect((other.json as? [Any])?.isEmpty == true)
    }

    @Test func logTellsTheHistoryWhoWhenWhat() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let log = try await db(["log", folder.path])
        #expect(log.status == 0, "\(log.stderr)")
        let lines = log.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "public/Todo, generation 0: 4 commits since snapshot sequence 0", "\(log.stdout)")
        #expect(lines.dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true).first } == ["#1", "#2", "#3", "#4"])
        #expect(lines[1].contains("created ") && lines[1].contains(#"title: "Buy milk""#))
        #expect(lines[3].contains("changed ") && lines[3].contains("(version 2)") && lines[3].contains("done: true"))
        #expect(lines[4].contains("deleted "))
        // Who: the writer id of each process, a different one per `mirror-todo` run.
        let writers = lines.dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true)[2] }
        #expect(Set(writers).count == 4, "\(writers)")

        let json = try await db(["--json", "log", folder.path])
        let zone = try #require((json.json as? [[String: Any]])?.first, "\(json.stdout)")
        let commits = try #require(zone["commits"] as? [[String: Any]])
        let operations = commits.compactMap { ($0["changes"] as? [[String: Any]])?.first?["op"] as? String }
        #expect(operations == ["save", "save", "save", "delete"])
    }

    @Test func statsCountsRecordsAndBytes() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let json = try await db(["--json", "stats", folder.path])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(json.json as? [String: Any], "\(json.stdout)")
        #expect(object["format"] as? Int == 2, "the database's format")
        let zone = try #require((object["zones"] as? [[String: Any]])?.first)
        #expect(zone["records"] as? Int == 1)
        #expect(zone["deleted"] as? Int == 1)
        #expect(zone["commitsInJournal"] as? Int == 4)
        // The journal's data: the spaces a writer reserves at its end are not counted.
        var data = try Data(contentsOf: URL(fileURLWithPath: journal(folder)))
        #expect(data.last == UInt8(ascii: " "), "a commit reserves space at the journal's end")
        while data.last == UInt8(ascii: " ") { data.removeLast() }
        let size = data.count
        #expect(zone["journalBytes"] as? Int == size)
        // Nor are more spaces after them.
        try append(String(repeating: " ", count: 100), to: journal(folder))
        let spaced = try await db(["--json", "stats", folder.path])
        let spacedZone = try #require(((spaced.json as? [String: Any])?["zones"] as? [[String: Any]])?.first)
        #expect(spacedZone["journalBytes"] as? Int == size)
        let text = try await db(["stats", folder.path])
        #expect(text.stdout.contains("public/Todo: 1 record, 1 deleted"), "\(text.stdout)")
    }

    @Test func verifyFindsWhatRecoveryWouldRepairAndChangesNothing() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let clean = try await db(["verify", folder.path])
        #expect(clean.status == 0, "\(clean.stdout)\(clean.stderr)")
        #expect(clean.stdout == "ok: 1 zone, 1 record, no problems\n")

        // A line that does not decode inside a complete append, then an unfinished write.
        let hand = #"{"seq":100,"op":"save","id":"hand","version":1,"clock":"1763703120123-0","writer":"w-hand","end":true,"fields":{"title":"By hand"}}"#
        try append("not json\n\(hand)\n{\"seq\":101,\"op\":\"sa", to: journal(folder))
        let before = try Data(contentsOf: URL(fileURLWithPath: journal(folder)))

        let damaged = try await db(["--json", "verify", folder.path])
        #expect(damaged.status == 1)
        let object = try #require(damaged.json as? [String: Any], "\(damaged.stdout)")
        let kinds = (object["problems"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
        #expect(kinds == ["bad-line", "torn-tail"])
        #expect(object["records"] as? Int == 2)
        let text = try await db(["verify", folder.path])
        #expect(text.status == 1)
        #expect(text.stdout.hasSuffix("2 problems in 1 zone\n"), "\(text.stdout)")
        // Read-only: not a byte changed, nothing quarantined.
        #expect(try Data(contentsOf: URL(fileURLWithPath: journal(folder))) == before)
        let quarantine = try await db(["quarantine", folder.path])
        #expect(quarantine.stdout == "no quarantine files\n")
    }

    @Test func quarantineListsAndShowsWhatRecoverySetAside() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        try append("{\"seq\":1\u{1B}[31m torn", to: journal(folder))
        // The next writer cuts the unfinished write into a quarantine file.
        #expect(try await Todo.run(["--db", folder.path, "add", "After"]).status == 0)

        let listed = try await db(["--json", "quarantine", folder.path])
        let files = try #require(listed.json as? [[String: Any]], "\(listed.stdout)")
        #expect(files.count == 1)
        let path = try #require(files.first?["file"] as? String)
        #expect(path.hasSuffix(".torn"))
        #expect(files.first?["bytes"] as? Int == 18)

        let name = URL(fileURLWithPath: path).lastPathComponent
        let shown = try await db(["quarantine", folder.path, name])
        #expect(shown.status == 0, "\(shown.stderr)")
        // The escape character is shown escaped, never sent to the terminal.
        #expect(shown.stdout.contains(#"{\"seq\":1\u{1B}[31m torn"#), "\(shown.stdout)")
        #expect(!shown.stdout.contains("\u{1B}"))
        let json = try await db(["--json", "quarantine", folder.path, "public/Todo/" + name])
        let object = try #require(json.json as? [String: Any], "\(json.stdout)")
        #expect((object["base64"] as? String).flatMap { Data(base64Encoded: $0) } == Data("{\"seq\":1\u{1B}[31m torn".utf8))

        let missing = try await db(["quarantine", folder.path, "nothing.bad"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no quarantine file nothing.bad"))
    }

    @Test func compactMovesTheJournalIntoTheSnapshot() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let compacted = try await db(["--json", "compact", folder.path, "Todo"])
        #expect(compacted.status == 0, "\(compacted.stderr)")
        let zone = try #require((compacted.json as? [[String: Any]])?.first, "\(compacted.stdout)")
        #expect(zone["journalBytes"] as? Int == 0)
        #expect(zone["records"] as? Int == 1)
        #expect((zone["generation"] as? Int ?? 0) > 0)

        let verified = try await db(["verify", folder.path])
        #expect(verified.status == 0, "\(verified.stdout)")
        let listed = try await Todo.list(folder)
        #expect(listed.map { $0["title"] as? String } == ["Buy milk"])
    }

    /// Progress goes to standard error when it is a terminal (here, the pseudo-terminal of
    /// `script`), and never into a pipe (the other tests check that standard error is empty).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func progressIsShownOnATerminalOnly() async throws {
        let folder = try await makeDatabase()
        defer { folder.remove() }
        let command = "\(BuiltProducts.executable("mirror-db").path) verify \(folder.path)"
        let (termination, output, _) = try await Subprocess.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"])
        #expect(termination.status == 0, "\(output)")
        #expect(output.contains("verifying public/Todo (1/1)"), "\(output)")
        #expect(output.contains("ok: 1 zone, 1 record, no problems"))
    }

    /// The journal's size and the size of its data (without the spaces reserved at its end).
    private func journalSizes(_ folder: TemporaryFolder) throws -> (file: Int, data: Int) {
        var data = try Data(contentsOf: URL(fileURLWithPath: journal(folder)))
        let file = data.count
        while data.last == UInt8(ascii: " ") { data.removeLast() }
        return (file, data.count)
    }

    /// A database of format 1 (as versions from before append checksums create them) is
    /// written at the end of its journals; `upgrade` makes it format 2, once, and the next
    /// process reserves space.
    @Test func upgradeRewritesTheFormatOnceAndRefusesTwice() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let databaseFile = URL(fileURLWithPath: folder.path + "/database.json")
        let identifier = UUID().uuidString
        try Data(#"{"format":1,"identifier":"\#(identifier)","created":"2025-11-21T05:44:21Z"}"#.utf8).write(to: databaseFile)
        #expect(try await Todo.run(["--db", folder.path, "add", "Before"]).status == 0)
        var sizes = try journalSizes(folder)
        #expect(sizes.file == sizes.data, "nothing reserved in a format-1 journal")
        let statsBefore = try await db(["stats", folder.path])
        #expect(statsBefore.stdout.hasPrefix("database \(folder.path), format 1 (mirror-db upgrade moves it to 2): 1 zone\n"),
                "\(statsBefore.stdout)")

        let upgraded = try await db(["upgrade", folder.path])
        #expect(upgraded.status == 0, "\(upgraded.stderr)")
        #expect(upgraded.stdout.contains("from format 1 to format 2"), "\(upgraded.stdout)")
        #expect(upgraded.stdout.contains("from before append checksums refuse"), "\(upgraded.stdout)")
        #expect(upgraded.stdout.contains("stopped first"), "\(upgraded.stdout)")
        let meta = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: databaseFile)) as? [String: Any])
        #expect(meta["format"] as? Int == 2)
        #expect(meta["identifier"] as? String == identifier)
        let afterUpgrade = try Data(contentsOf: databaseFile)

        let twice = try await db(["--json", "upgrade", folder.path])
        #expect(twice.status == 1)
        #expect(twice.stderr.contains("is in format 2 already"), "\(twice.stderr)")
        #expect(try Data(contentsOf: databaseFile) == afterUpgrade)

        #expect(try await Todo.run(["--db", folder.path, "add", "After"]).status == 0)
        sizes = try journalSizes(folder)
        #expect(sizes.file == sizes.data + 16 * 1024, "a process opened on format 2 reserves space")
        #expect(try await Todo.list(folder).map { $0["title"] as? String } == ["Before", "After"])
        let verified = try await db(["verify", folder.path])
        #expect(verified.status == 0, "\(verified.stdout)")
        let stats = try await db(["stats", folder.path])
        #expect(stats.stdout.hasPrefix("database \(folder.path), format 2: 1 zone\n"), "\(stats.stdout)")

        let notADatabase = try TemporaryFolder()
        defer { notADatabase.remove() }
        try FileManager.default.createDirectory(atPath: notADatabase.path + "/public", withIntermediateDirectories: true)
        let refused = try await db(["upgrade", notADatabase.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("is not a MagicMirror database"), "\(refused.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: notADatabase.path) == ["public"], "nothing created")
    }

    @Test func mistakesGetAClearMessage() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let notADatabase = try await db(["show", folder.path])
        #expect(notADatabase.status == 1)
        #expect(notADatabase.stderr.contains("is not a MagicMirror database"), "\(notADatabase.stderr)")
        let compact = try await db(["compact", folder.path])
        #expect(compact.status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "compact created nothing")

        let unknown = try await db(["frobnicate", folder.path])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("unknown command frobnicate"))
        let help = try await db(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("verify DIR"))
        #expect(help.stdout.contains("upgrade DIR"))
        let upgrade = try await db(["upgrade", folder.path])
        #expect(upgrade.status == 1)
        #expect(upgrade.stderr.contains("is not a MagicMirror database"), "\(upgrade.stderr)")
    }
}
