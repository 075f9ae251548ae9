import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// `mirror-todo-relay` and `mirror-relay token` run as a user would: mirror-todo's console
/// through a relay, with a token the relay's own tool signed, as the README shows.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayTodoConsoleTests {
    private static let tokenEnvironment = [
        "MIRROR_RELAY_HS256_SECRET": RelayTestServer.secret, "MIRROR_RELAY_AUDIENCE": RelayTestServer.audience,
    ]

    /// `mirror-relay token --subject user`, the line it prints.
    private func token(_ arguments: [String], environment: [String: String] = tokenEnvironment) async throws
        -> (termination: Subprocess.Termination, token: String, standardError: String)
    {
        let result = try await Subprocess.run(
            BuiltProducts.executable("mirror-relay"), ["token"] + arguments, environment: environment)
        return (result.termination, result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines), result.standardError)
    }

    private func todo(_ arguments: [String], environment: [String: String]) async throws
        -> (termination: Subprocess.Termination, standardOutput: String, standardError: String)
    {
        try await Subprocess.run(BuiltProducts.executable("mirror-todo-relay"), arguments, environment: environment)
    }

    private func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    @Test func twoTerminalsOfTwoUsersOneListThroughARelay() async throws {
        try await RunningRelay.with { relay in
            let alice = RelayTestServer.uniqueName("alice"), bob = RelayTestServer.uniqueName("bob")
            let aliceToken = try await token(["--subject", alice])
            #expect(aliceToken.termination == .exited(0), "\(aliceToken.standardError)")
            let bobToken = try await token(["--subject", bob, "--lifetime", "600"])
            let asAlice = ["MAGICMIRROR_RELAY_URL": relay.url.absoluteString, "MAGICMIRROR_RELAY_TOKEN": aliceToken.token]
            let asBob = ["MAGICMIRROR_RELAY_TOKEN": bobToken.token]

            let added = try await todo(["add", "Buy milk"], environment: asAlice)
            #expect(added.termination == .exited(0), "\(added.standardError)")
            #expect(added.standardOutput.hasPrefix("added 1. [ ] Buy milk  ("), "\(added.standardOutput)")

            // Alice's terminal watches; bob's edits, naming the relay with --relay.
            let watcher = try Subprocess(
                BuiltProducts.executable("mirror-todo-relay"), ["--json", "watch"], environment: asAlice)
            defer { watcher.kill() }
            let listed = try object(try await watcher.nextLine())
            #expect(listed["change"] as? String == "listed")
            #expect(listed["title"] as? String == "Buy milk")
            try await watcher.waitForStandardError(containing: "watching", timeout: .seconds(60))

            let relayFlag = ["--relay", relay.url.absoluteString]
            #expect(try await todo(relayFlag + ["add", "Call mom"], environment: asBob).termination == .exited(0))
            let inserted = try object(try await watcher.nextLine())
            #expect(inserted["change"] as? String == "inserted")
            #expect(inserted["title"] as? String == "Call mom")
            #expect(inserted["number"] as? Int == 2)
            #expect(try await todo(relayFlag + ["done", "2"], environment: asBob).termination == .exited(0))
            let updated = try object(try await watcher.nextLine())
            #expect(updated["change"] as? String == "updated")
            #expect(updated["done"] as? Bool == true)

            // Private lists are the token's subject's: bob's is not alice's.
            #expect(try await todo(["--private", "add", "Alice's secret"], environment: asAlice).termination == .exited(0))
            let bobsPrivate = try await todo(relayFlag + ["--private", "--json", "list"], environment: asBob)
            #expect(bobsPrivate.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(bobsPrivate.standardOutput) \(bobsPrivate.standardError)")
            let alicesPrivate = try await todo(["--private", "list"], environment: asAlice)
            #expect(alicesPrivate.standardOutput.contains("1. [ ] Alice's secret"), "\(alicesPrivate.standardOutput)")

            watcher.kill(SIGINT)
            #expect(try await watcher.wait(timeout: .seconds(60)) == .exited(0))
        }
    }

    /// The README's way to try it: `try-relay.sh` on a throwaway server prints what each
    /// user's terminal pastes, and those terminals share one list.
    @Test func theTryRelayScriptServesTwoUsers() async throws {
        let database = RelayTestServer.uniqueName("tryrelay")
        _ = try await RelayTestServer.admin("CREATE DATABASE \(database)")
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Scripts/try-relay.sh")
        let port = try freeLoopbackPort()
        let relay = try Subprocess(
            script, [String(port)],
            environment: [
                "MAGICMIRROR_POSTGRES_URL": RelayTestServer.url(database: database),
                "MIRROR_RELAY_BIN_PATH": BuiltProducts.directory.path, "MIRROR_RELAY_LOG_LEVEL": "warning",
            ])
        defer {
            relay.kill()
            Task { _ = try? await RelayTestServer.admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)") }
        }
        // Two users' lines to paste, then the relay's own line once it listens.
        var environments: [[String: String]] = []
        while true {
            let line = try await relay.nextLine(timeout: .seconds(120))
            if line.hasPrefix("export ") {
                var environment: [String: String] = [:]
                for assignment in line.dropFirst("export ".count).split(separator: " ") {
                    let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
                    environment[parts[0]] = parts[1]
                }
                environments.append(environment)
            } else if line.contains(":\(port)"), !line.hasPrefix("#") {
                break
            }
        }
        try #require(environments.count == 2, "\(relay.standardError)")
        #expect(environments[0]["MAGICMIRROR_RELAY_URL"] == "http://127.0.0.1:\(port)")
        let added = try await todo(["add", "Buy milk"], environment: environments[0])
        #expect(added.termination == .exited(0), "\(added.standardError)")
        let listed = try await todo(["list"], environment: environments[1])
        #expect(listed.standardOutput.contains("1. [ ] Buy milk"), "\(listed.standardOutput) \(listed.standardError)")
        relay.kill(SIGTERM)
        _ = try await relay.wait(timeout: .seconds(60))
    }

    @Test func withoutARelayOrATokenItSaysWhatToSet() async throws {
        let noRelay = try await todo(["list"], environment: ["MAGICMIRROR_RELAY_URL": "", "MAGICMIRROR_RELAY_TOKEN": ""])
        #expect(noRelay.termination == .exited(1))
        #expect(noRelay.standardError.hasPrefix("mirror-todo-relay: no relay: pass --relay URL"), "\(noRelay.standardError)")
        let noToken = try await todo(
            ["--relay", "http://127.0.0.1:9", "list"], environment: ["MAGICMIRROR_RELAY_TOKEN": ""])
        #expect(noToken.termination == .exited(1))
        #expect(noToken.standardError.contains("no token: set MAGICMIRROR_RELAY_TOKEN"), "\(noToken.standardError)")
        let notAToken = try await todo(
            ["--relay", "http://127.0.0.1:9", "list"], environment: ["MAGICMIRROR_RELAY_TOKEN": "hello"])
        #expect(notAToken.termination == .exited(1))
        #expect(notAToken.standardError.contains("is not a token"), "\(notAToken.standardError)")
        let badURL = try await todo(["--relay", "ftp://x", "list"], environment: ["MAGICMIRROR_RELAY_TOKEN": "a.b.c"])
        #expect(badURL.termination == .exited(1))
        #expect(badURL.standardError.contains("is not a relay's URL"), "\(badURL.standardError)")
        let help = try await todo(["help"], environment: [:])
        #expect(help.standardOutput.contains("usage: mirror-todo-relay [--relay URL]"), "\(help.standardOutput)")
    }

    @Test func theTokenToolRefusesWhatTheRelayWouldRefuse() async throws {
        let noSubject = try await token([])
        #expect(noSubject.termination == .exited(1))
        #expect(noSubject.standardError.contains("no user: give --subject USER"), "\(noSubject.standardError)")
        let reserved = try await token(["--subject", "pg_monitor"])
        #expect(reserved.termination == .exited(1))
        #expect(reserved.standardError.contains("the subject cannot be a user name"), "\(reserved.standardError)")
        let noSecret = try await token(["--subject", "alice"], environment: ["MIRROR_RELAY_AUDIENCE": "a"])
        #expect(noSecret.termination == .exited(1))
        #expect(noSecret.standardError.contains("no secret"), "\(noSecret.standardError)")
        let lifetime = try await token(["--subject", "alice", "--lifetime", "-5"])
        #expect(lifetime.termination == .exited(1))
        #expect(lifetime.standardError.contains("--lifetime must be a number of seconds"), "\(lifetime.standardError)")
        let unknown = try await token(["--subject", "alice", "--user", "bob"])
        #expect(unknown.termination == .exited(1))
        #expect(unknown.standardError.contains("unknown option --user"), "\(unknown.standardError)")
    }
}
