#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// `ReplicatedDatabase` in real processes (`mirror-worker mirror --remote DIR`), killed with
/// SIGKILL. The remote is a JSON-file database in a directory of its own, standing in for a
/// server that every process and the test reach; it is "unreachable" while the file
/// `DIR.offline` exists (the worker's `SwitchableRemote`). An `InMemoryDatabase` cannot be
/// shared by processes, so this is the honest stand-in.
@Suite(.timeLimit(.minutes(5))) struct ReplicatedProcessTests {
    typealias Todo = MirrorProcess.Todo
    let zone = ZoneID.public("Todo")

    /// A replica directory and a stand-in server directory, the server switched off.
    private struct Setup {
        let replica: TemporaryDirectory
        let serverDirectory: TemporaryDirectory
        var marker: String { serverDirectory.path + ".offline" }
        var workerArguments: [String] { ["--remote", serverDirectory.path] }

        init(_ label: String) throws {
            replica = try TemporaryDirectory("replica-\(label)")
            serverDirectory = try TemporaryDirectory("server-\(label)")
            guard FileManager.default.createFile(atPath: serverDirectory.path + ".offline", contents: nil) else {
                throw MirrorError(.ioFailure, "cannot switch the stand-in server off")
            }
        }

        func switchServerOn() throws { try FileManager.default.removeItem(atPath: marker) }

        func remove() {
            replica.remove()
            serverDirectory.remove()
            try? FileManager.default.removeItem(atPath: marker)
        }
    }

    private func todos(on server: JSONFileDatabase) async throws -> [Todo] {
        try await server.fetchAll(in: zone).records.map { record in
            try JSONDecoder().decode(Todo.self, from: #require(record.fields))
        }.sorted()
    }

    @Test func offlineEditsSurviveSIGKILLAndReachTheServerWithAnotherWritersChanges() async throws {
        let setup = try Setup("process")
        defer { setup.remove() }
        let (replica, serverDirectory) = (setup.replica, setup.serverDirectory)
        let server = try JSONFileDatabase(isolatedDirectory: serverDirectory.url)

        // Edits made offline are flushed (durable in the replica), then the process is killed.
        let first = try await MirrorProcess("A", directory: replica, setup.workerArguments)
        try await first.send("add t1 written offline")
        try await first.send("edit t1 written offline, edited")
        try await first.send("flush")
        first.process.kill(SIGKILL)
        #expect(try await first.process.wait(timeout: testTimeout) == .signaled(SIGKILL))

        // Reopened, still offline: the edits are there.
        let second = try await MirrorProcess("B", directory: replica, setup.workerArguments)
        let mine = Todo(id: "t1", title: "written offline, edited")
        #expect(second.records == [mine])
        await #expect(throws: MirrorError.self) { try await second.send("sync") }

        // Meanwhile another machine wrote to the server: a record of its own, and, later
        // than the offline edit, the same record t1 with another title.
        let theirs = Todo(id: "t2", title: "from another machine")
        let theirT1 = Todo(id: "t1", title: "t1 from another machine")
        let clock = HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000) + 1)
        try await server.commit(
            [.save("t2", fields: try JSONEncoder().encode(theirs), baseVersion: 0, timestamp: clock),
             .save("t1", fields: try JSONEncoder().encode(theirT1), baseVersion: 0, timestamp: clock)],
            to: zone)

        // The server is back: the offline edit meets the other machine's t1 and the default
        // policy (changedKeys) settles it: the title changed on both sides goes to the later
        // writer, the other machine. Both sides agree, and the other record arrives.
        try setup.switchServerOn()
        try await second.send("sync")
        #expect(try await todos(on: server) == [theirT1, theirs])
        try await second.waitForRecords("the settled records") { $0.sorted() == [theirT1, theirs] }
        #expect(mine != theirT1)

        // An edit made now, online, goes through on top of it, once.
        try await second.send("edit t1 edited after the outage")
        try await second.send("flush")
        try await second.send("sync")
        let stored = try #require(try await server.fetch(["t1"], in: zone).first)
        #expect(stored.version == 2)
        #expect(try await todos(on: server) == [Todo(id: "t1", title: "edited after the outage"), theirs])
        #expect(try await second.quit() == 0)
    }

    /// Two processes sharing one replica while the server is away see each other's changes
    /// at once, as over a shared JSON-file database; either sends them when it is back.
    @Test func twoProcessesSharingAReplicaSeeEachOtherOffline() async throws {
        let setup = try Setup("shared-process")
        defer { setup.remove() }
        let (replica, serverDirectory) = (setup.replica, setup.serverDirectory)
        let a = try await MirrorProcess("A", directory: replica, setup.workerArguments)
        let b = try await MirrorProcess("B", directory: replica, setup.workerArguments)
        try await a.send("add t1 from A")
        try await a.send("flush")
        try await b.waitForRecords("A's record") { $0 == [Todo(id: "t1", title: "from A")] }
        try await b.send("edit t1 from A, edited by B")
        try await b.send("flush")
        let edited = Todo(id: "t1", title: "from A, edited by B")
        try await a.waitForRecords("B's edit") { $0 == [edited] }

        try setup.switchServerOn()
        try await a.send("sync")
        let server = try JSONFileDatabase(isolatedDirectory: serverDirectory.url)
        #expect(try await todos(on: server) == [edited])
        try await b.send("sync")
        #expect(try await server.fetch(["t1"], in: zone).first?.version == 1)
        #expect(try await a.quit() == 0)
        #expect(try await b.quit() == 0)
    }
}
