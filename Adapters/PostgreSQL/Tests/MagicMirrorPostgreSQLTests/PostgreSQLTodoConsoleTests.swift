import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// `mirror-todo-postgres` run as a user would, against the test server: mirror-todo's
/// console on a PostgreSQL database, so that terminals on several machines share a list.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLTodoConsoleTests {
    private func todo(_ arguments: [String], environment: [String: String] = [:]) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        try await PackageExecutable.run("mirror-todo-postgres", arguments, environment: environment)
    }

    @Test func twoTerminalsOneListThroughTheServer() async throws {
        try await TestServer.withDatabase { name, _ in
            let url = TestServer.url(database: name)
            let added = try await todo(["--url", url, "add", "Buy milk"])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(added.stdout.hasPrefix("added 1. [ ] Buy milk  ("), "\(added.stdout)")

            // Terminal 1 watches; the URL comes from the environment here.
            let watcher = try PackageExecutable.start(
                "mirror-todo-postgres", ["--json", "watch"], environment: ["MAGICMIRROR_POSTGRES_URL": url])
            defer { watcher.kill() }
            let listed = try object(try await watcher.nextLine())
            #expect(listed["change"] as? String == "listed")
            #expect(listed["title"] as? String == "Buy milk")
            #expect(listed["number"] as? Int == 1)
            try await watcher.waitForStandardError(containing: "watching", timeout: .seconds(60))

            // Terminal 2 edits.
            #expect(try await todo(["--url", url, "add", "Call mom"]).status == 0)
            let inserted = try object(try await watcher.nextLine())
            #expect(inserted["change"] as? String == "inserted")
            #expect(inserted["title"] as? String == "Call mom")
            #expect(inserted["number"] as? Int == 2)
            #expect(try await todo(["--url", url, "done", "2"]).status == 0)
            let updated = try object(try await watcher.nextLine())
            #expect(updated["change"] as? String == "updated")
            #expect(updated["done"] as? Bool == true)

            let list = try await todo(["--url", url, "list"])
            #expect(list.stdout.contains("1. [ ] Buy milk"), "\(list.stdout)")
            #expect(list.stdout.contains("2. [x] Call mom"), "\(list.stdout)")
            // Ctrl-C ends watch cleanly.
            watcher.kill(SIGINT)
            #expect(try await watcher.wait(timeout: .seconds(60)) == .exited(0))
        }
    }

    @Test func thePrivateListBelongsToTheRole() async throws {
        try await TestServer.withDatabase { name, _ in
            let url = TestServer.url(database: name)
            #expect(try await todo(["--url", url, "--private", "add", "Secret"]).status == 0)
            #expect(try await todo(["--url", url, "--json", "list"]).stdout == "[]")
            let mine = try await todo(["--url", url, "--private", "list"])
            #expect(mine.stdout.contains("1. [ ] Secret"), "\(mine.stdout) \(mine.stderr)")
        }
    }

    @Test func withoutAServerItSaysHowToNameOne() async throws {
        let result = try await todo(["list"], environment: ["MAGICMIRROR_POSTGRES_URL": ""])
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("mirror-todo-postgres: no server: pass --url"), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)
        let help = try await todo(["help"])
        #expect(help.stdout.contains("usage: mirror-todo-postgres [--url URL]"), "\(help.stdout)")
    }

    private func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }
}
