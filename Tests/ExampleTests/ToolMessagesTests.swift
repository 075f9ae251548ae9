import Foundation
import MirrorTestSupport
import Testing

/// What `mirror-db` and `mirror-todo` say, run as a user would (issue #36, point 8): zones
/// named by their scope, counts in the singular for one, a short usage error, the size of a
/// damaged tail without the reserved space, and `mirror-todo` on a file, a missing
/// directory or a read-only one.
@Suite(.timeLimit(.minutes(5))) struct ToolMessagesTests {
    private func db(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let (termination, stdout, stderr) = try await Subprocess.run(BuiltProducts.executable("mirror-db"), arguments)
        return (termination.status, stdout, stderr)
    }

    /// A database with one to-do, written by `mirror-todo`.
    private func database() async throws -> TemporaryFolder {
        let folder = try TemporaryFolder()
        let added = try await Todo.run(["--db", folder.path, "add", "Buy milk"])
        #expect(added.status == 0, "\(added.stderr)")
        return folder
    }

    @Test func aSharedZoneIsNamedSharedOnceAndAPrivateOnePrivate() async throws {
        let folder = try await database()
        defer { folder.remove() }
        // The zone's files, copied as bob's private zone and as the zone shared with bob.
        let manager = FileManager.default
        for scope in ["private", "shared"] {
            try manager.createDirectory(atPath: folder.path + "/\(scope)/bob", withIntermediateDirectories: true)
            try manager.copyItem(atPath: folder.path + "/public/Todo", toPath: folder.path + "/\(scope)/bob/Todo")
        }
        let shown = try await db(["show", folder.path])
        #expect(shown.status == 0, "\(shown.stderr)")
        let headers = shown.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }
        #expect(headers == ["public/Todo: 1 record", "private/bob/Todo: 1 record", "shared/bob/Todo: 1 record"], "\(shown.stdout)")
        let stats = try await db(["stats", folder.path])
        #expect(stats.stdout.contains("  shared/bob/Todo: 1 record, 0 deleted;"), "\(stats.stdout)")
        #expect(stats.stdout.components(separatedBy: "private/bob/Todo").count == 2, "\(stats.stdout)")
        #expect(stats.stdout.contains(": 3 zones\n"), "\(stats.stdout)")
    }

    @Test func oneIsSingular() async throws {
        let folder = try await database()
        defer { folder.remove() }
        let stats = try await db(["stats", folder.path])
        #expect(stats.stdout.contains(": 1 zone\n"), "\(stats.stdout)")
        #expect(stats.stdout.contains("public/Todo: 1 record, 0 deleted;"), "\(stats.stdout)")
        #expect(stats.stdout.contains("(1 commit, "), "\(stats.stdout)")
        #expect(stats.stdout.contains("; 0 quarantine files"), "\(stats.stdout)")
        #expect(!stats.stdout.contains("1 records") && !stats.stdout.contains("1 commits"), "\(stats.stdout)")
        let log = try await db(["log", folder.path])
        #expect(log.stdout.hasPrefix("public/Todo, generation 0: 1 commit"), "\(log.stdout)")
        let verify = try await db(["verify", folder.path])
        #expect(verify.stdout == "ok: 1 zone, 1 record, no problems\n", "\(verify.stdout)")
    }

    @Test func aUsageErrorIsTwoLinesNotTheHelp() async throws {
        for arguments in [["frobnicate", "/tmp"], ["show"], ["stats", "/tmp", "extra"]] {
            let run = try await db(arguments)
            #expect(run.status == 2)
            let lines = run.stderr.split(separator: "\n")
            #expect(lines.count == 2, "\(arguments): \(run.stderr)")
            #expect(lines.first?.hasPrefix("mirror-db: ") == true)
            #expect(lines.last == "usage: mirror-db [--json] COMMAND DIR [ARGUMENTS] (mirror-db help lists the commands)")
            #expect(run.stdout.isEmpty)
        }
    }

    @Test func garbageAfterTheReservedSpaceIsCountedAsItself() async throws {
        let folder = try await database()
        defer { folder.remove() }
        let journal = folder.path + "/public/Todo/journal-0.ndjson"
        let handle = try #require(FileHandle(forWritingAtPath: journal))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("0123456789abcdef".utf8))   // 16 bytes after the reserved spaces
        try handle.close()
        let verify = try await db(["verify", folder.path])
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("16 bytes after the last complete append"), "\(verify.stdout)")

        // Recovery, when a writer cuts them, says the same.
        let added = try await Todo.run(["--db", folder.path, "add", "Call mum"])
        #expect(added.status == 0, "\(added.stderr)")
        let quarantine = try await db(["quarantine", folder.path])
        #expect(quarantine.stdout.contains(".torn"), "\(quarantine.stdout)")
    }

    @Test func todoOnAFileSaysItIsAFile() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.path + "/notes.txt"
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: file))
        let list = try await Todo.run(["--db", file, "list"])
        #expect(list.status == 1)
        #expect(list.stderr.hasPrefix("mirror-todo: \(file) is a file, not a directory"), "\(list.stderr)")
        #expect(!list.stderr.contains("File exists"), "\(list.stderr)")
    }

    @Test func listOnAMissingDirectoryCreatesNothing() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let missing = folder.path + "/not/there"
        let list = try await Todo.run(["--db", missing, "list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout == "the list is empty; add an item with: mirror-todo add TITLE")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/not"), "list created directories")
        let json = try await Todo.run(["--db", missing, "--json", "list"])
        #expect(json.stdout == "[]", "\(json.stdout)")
    }

    @Test(.enabled(if: geteuid() != 0, "root writes into read-only directories"))
    func listOnAnEmptyReadOnlyDirectoryIsEmptyAndAnAddSaysWhy() async throws {
        let folder = try TemporaryFolder()
        defer {
            chmod(folder.path, 0o755)
            folder.remove()
        }
        #expect(chmod(folder.path, 0o555) == 0)
        let list = try await Todo.run(["--db", folder.path, "list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.hasPrefix("the list is empty"))
        let add = try await Todo.run(["--db", folder.path, "add", "Buy milk"])
        #expect(add.status == 1)
        #expect(add.stderr.contains("cannot create database.json, which makes \(folder.path) a database: Permission denied"),
                "\(add.stderr)")
        #expect(!add.stderr.contains(".tmp-"), "\(add.stderr)")
    }

    /// Appends `text` where the journal's data ends (over the spaces reserved at its end), as
    /// a writer appends.
    private func append(_ text: String, to path: String) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        while data.last == UInt8(ascii: " ") { data.removeLast() }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(data.count))
        try handle.write(contentsOf: Data(text.utf8))
    }

    /// A debug build of a program says on standard error that it skipped records that do
    /// not decode (issue #36, point 1): `list` shows the others and the line says why.
    @Test func aRecordThatDoesNotDecodeIsNamedOnStandardError() async throws {
        let folder = try await database()
        defer { folder.remove() }
        let id = UUID().uuidString
        // A to-do written by another program, without the title every to-do has.
        try append(
            #"{"seq":2,"op":"save","id":"\#(id)","version":1,"clock":"1763703120123-0","writer":"w-hand","end":true,"fields":{"done":false,"id":"\#(id)"}}"# + "\n",
            to: folder.path + "/public/Todo/journal-0.ndjson")
        // On, even when the test run was started with it off (Scripts/test-all.sh).
        let list = try await Todo.run(["--db", folder.path, "list"], environment: ["MAGICMIRROR_SKIPPED_RECORDS_LOG": "on"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("Buy milk"), "\(list.stdout)")
        #expect(list.stderr.contains(
            "MagicMirror: 1 stored record of public/Todo does not decode as Todo and is skipped"), "\(list.stderr)")
        #expect(list.stderr.contains(#"field "title" is missing"#), "\(list.stderr)")
    }

    @Test func theLineIsQuietWhenTheEnvironmentSaysOff() async throws {
        let folder = try await database()
        defer { folder.remove() }
        let id = UUID().uuidString
        try append(
            #"{"seq":2,"op":"save","id":"\#(id)","version":1,"clock":"1763703120123-0","writer":"w-hand","end":true,"fields":{"done":false,"id":"\#(id)"}}"# + "\n",
            to: folder.path + "/public/Todo/journal-0.ndjson")
        let list = try await Todo.run(["--db", folder.path, "list"], environment: ["MAGICMIRROR_SKIPPED_RECORDS_LOG": "off"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stderr.isEmpty, "\(list.stderr)")
    }
}
