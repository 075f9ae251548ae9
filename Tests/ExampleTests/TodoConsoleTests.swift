import Foundation
import MirrorTestSupport
import Testing

/// Runs the built `mirror-todo` as a user would and checks what it prints.
@Suite(.timeLimit(.minutes(5))) struct TodoConsoleTests {
    @Test func addListDoneRemoveRoundTrip() async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        let added = try await Todo.run(["--db", db.path, "--json", "add", "Buy milk"])
        #expect(added.status == 0, "\(added.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: Any])
        let id = try #require(object["id"] as? String)
        #expect(object["title"] as? String == "Buy milk")
        #expect(object["done"] as? Bool == false)

        let second = try await Todo.run(["--db", db.path, "add", "Call mom"])
        #expect(second.status == 0)
        #expect(second.stdout.contains("Call mom"))

        let listed = try await Todo.list(db)
        #expect(listed.map { $0["title"] as? String } == ["Buy milk", "Call mom"])
        #expect(listed.map { $0["number"] as? Int } == [1, 2])
        #expect(listed.allSatisfy { ($0["created"] as? String)?.hasSuffix("Z") == true })

        let done = try await Todo.run(["--db", db.path, "done", "1"])
        #expect(done.status == 0, "\(done.stderr)")
        #expect(try await Todo.list(db).first?["done"] as? Bool == true)

        let undone = try await Todo.run(["--db", db.path, "undone", id])
        #expect(undone.status == 0, "\(undone.stderr)")
        #expect(try await Todo.list(db).first?["done"] as? Bool == false)

        let edited = try await Todo.run(["--db", db.path, "edit", id, "Buy oat milk"])
        #expect(edited.status == 0, "\(edited.stderr)")
        #expect(try await Todo.list(db).first?["title"] as? String == "Buy oat milk")

        let human = try await Todo.run(["--db", db.path, "list"])
        #expect(human.stdout.contains("1. [ ] Buy oat milk"))
        #expect(human.stdout.contains("2. [ ] Call mom"))

        let removed = try await Todo.run(["--db", db.path, "remove", id])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try await Todo.list(db).map { $0["title"] as? String } == ["Call mom"])

        let cleared = try await Todo.run(["--db", db.path, "clear"])
        #expect(cleared.status == 0)
        #expect(try await Todo.list(db).isEmpty)
    }

    @Test func withoutDBTheDefaultLocationFollowsTheEnvironment() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let environment = ["MAGICMIRROR_DIRECTORY": folder.path]
        let added = try await Todo.run(["add", "Default place"], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let journal = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/public/Todo")
            .filter { $0.hasPrefix("journal-") }
        #expect(!journal.isEmpty)
        let listed = try await Todo.run(["--json", "list"], environment: environment)
        #expect(listed.stdout.contains("Default place"))
    }

    @Test func privateListIsSeparateFromThePublicOne() async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        #expect(try await Todo.run(["--db", db.path, "--private", "add", "Secret"]).status == 0)
        #expect(try await Todo.list(db).isEmpty)
        #expect(try await Todo.list(db, extra: ["--private"]).map { $0["title"] as? String } == ["Secret"])
    }

    @Test func watchPrintsTheListThenEachChangeWithItsNumber() async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        // The zone exists before the watcher starts, as after a first use.
        #expect(try await Todo.run(["--db", db.path, "add", "First"]).status == 0)
        let watcher = try Todo.start(["--db", db.path, "--json", "watch"])
        defer { watcher.kill() }
        // The list first, in the schema of `list`, marked "listed".
        let listed = try await watcher.nextObject()
        #expect(listed["change"] as? String == "listed")
        #expect(listed["title"] as? String == "First")
        #expect(listed["number"] as? Int == 1)
        try await watcher.waitForStandardError(containing: "watching", timeout: .seconds(60))

        let added = try await Todo.run(["--db", db.path, "--json", "add", "From another process"])
        #expect(added.status == 0, "\(added.stderr)")
        // Waits for the event; how fast it comes is the benchmark's `propagate` workload.
        let change = try await watcher.nextObject()
        #expect(change["change"] as? String == "inserted")
        #expect(change["title"] as? String == "From another process")
        #expect(change["done"] as? Bool == false)
        #expect(change["number"] as? Int == 2)
        #expect(change["created"] as? String != nil)
        let id = try #require(change["id"] as? String)
        // One schema: a watched item has the keys of a listed one, plus "change".
        let item = try #require(try await Todo.list(db).last)
        #expect(Set(change.keys) == Set(item.keys).union(["change"]))
        #expect(Set(listed.keys) == Set(change.keys))

        #expect(try await Todo.run(["--db", db.path, "done", id]).status == 0)
        let update = try await watcher.nextObject()
        #expect(update["change"] as? String == "updated")
        #expect(update["done"] as? Bool == true)
        #expect(update["number"] as? Int == 2)

        #expect(try await Todo.run(["--db", db.path, "remove", "1"]).status == 0)
        let removal = try await watcher.nextObject()
        #expect(removal["change"] as? String == "removed")
        #expect(removal["title"] as? String == "First")
        #expect(removal["number"] as? Int == 1)

        // Ctrl-C ends it cleanly.
        try await watcher.stop()
        #expect(watcher.termination == .exited(0))
    }

    @Test func watchInTextShowsTheListALegendAndNumberedChanges() async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        #expect(try await Todo.run(["--db", db.path, "add", "First"]).status == 0)
        #expect(try await Todo.run(["--db", db.path, "add", "Second"]).status == 0)
        let watcher = try Todo.start(["--db", db.path, "watch"])
        defer { watcher.kill() }
        #expect(try await watcher.nextLine(timeout: .seconds(60)).hasPrefix("1. [ ] First  ("))
        #expect(try await watcher.nextLine(timeout: .seconds(60)).hasPrefix("2. [ ] Second  ("))
        try await watcher.waitForStandardError(containing: "watching", timeout: .seconds(60))
        #expect(watcher.standardError.contains("+ added, ~ changed, - removed"), "\(watcher.standardError)")

        #expect(try await Todo.run(["--db", db.path, "add", "Third"]).status == 0)
        #expect(try await watcher.nextLine(timeout: .seconds(60)).hasPrefix("+ 3. [ ] Third  ("))
        #expect(try await Todo.run(["--db", db.path, "done", "3"]).status == 0)
        #expect(try await watcher.nextLine(timeout: .seconds(60)).hasPrefix("~ 3. [x] Third  ("))
        // A removal renumbers the items after it, as the help says.
        #expect(try await Todo.run(["--db", db.path, "remove", "1"]).status == 0)
        #expect(try await watcher.nextLine(timeout: .seconds(60)).hasPrefix("- 1. [ ] First  ("))
        let human = try await Todo.run(["--db", db.path, "list"])
        #expect(human.stdout.hasPrefix("1. [ ] Second"))
        try await watcher.stop()
    }

    @Test func titlesAreMadeSafeForTheTerminal() async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        let hostile = "Red \u{1B}[31mALERT\nsecond line\u{202E}txt.exe\u{7}"
        let added = try await Todo.run(["--db", db.path, "add", hostile])
        #expect(added.status == 0, "\(added.stderr)")
        let watcher = try Todo.start(["--db", db.path, "watch"])
        defer { watcher.kill() }
        let watched = try await watcher.nextLine(timeout: .seconds(60))
        let listed = try await Todo.run(["--db", db.path, "list"])
        for output in [added.stdout, listed.stdout, watched] {
            #expect(output.split(separator: "\n").count == 1, "\(output)")
            #expect(!output.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(output)")
            #expect(!output.unicodeScalars.contains("\u{202E}"), "\(output)")
            #expect(output.contains(#"Red \u{1B}[31mALERT\nsecond line\u{202E}txt.exe\u{7}"#), "\(output)")
        }
        // JSON keeps the title exactly, escaped as JSON.
        #expect(try await Todo.list(db).first?["title"] as? String == hostile)
        try await watcher.stop()
    }

    @Test func theHelpDocumentsNumbersTheLegendAndJSONForEveryCommand() async throws {
        let help = try await Todo.run(["help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("removing an item\n  renumbers the items after it"), "\(help.stdout)")
        #expect(help.stdout.contains("+ N. item   added"))
        #expect(help.stdout.contains("- N. item   removed"))
        let json = try #require(help.stdout.components(separatedBy: "--json").last)
        for command in ["list", "add", "done", "undone", "edit", "remove", "clear", "watch"] {
            #expect(json.contains(command), "--json does not document \(command)")
        }
        #expect(json.contains(#""number", "id", "title", "done", "created""#))
    }

    @Test(arguments: [
        (["frobnicate"], "unknown command 'frobnicate'"),
        ([String](), "missing command"),
        (["add"], "add needs a TITLE"),
        (["done"], "done needs an ID"),
        (["edit", "1"], "edit needs an ID and a TITLE"),
        (["done", "42"], "no item number 42"),
        (["remove", "no-such-id"], "no item with id no-such-id"),
        (["--bogus", "list"], "unknown option --bogus"),
    ])
    func badInputGivesOneClearLineAndFails(arguments: [String], message: String) async throws {
        let db = try TemporaryFolder()
        defer { db.remove() }
        let result = try await Todo.run(["--db", db.path] + arguments)
        #expect(result.status != 0)
        #expect(result.stderr.hasPrefix("mirror-todo: "), "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test func anUnwritableDatabaseDirectoryFailsClearly() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        // A regular file where the database directory should be: unwritable even for root.
        let file = folder.url.appendingPathComponent("not-a-directory")
        try Data("x".utf8).write(to: file)
        let result = try await Todo.run(["--db", file.path + "/db", "add", "x"])
        #expect(result.status != 0)
        #expect(result.stderr.hasPrefix("mirror-todo: "), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        // Why (the errno text), and the path once.
        #expect(result.stderr.contains("Not a directory"), "\(result.stderr)")
        #expect(result.stderr.components(separatedBy: file.path + "/db").count == 2, "\(result.stderr)")
    }
}
