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
@Suite struct ReplicatedProcessTests {
    typealias Todo = MirrorProcess.Todo
    let zone = ZoneID.public("Todo")

    private func todos(on server: JSONFileDatabase) async throws -> [Todo] {
        try await server.fetchAll(in: zone).records.map { record in
            try JSONDecoder().decode(Todo.self, from: #require(record.fields))
        }.sorted()
    }

    @Test func offlineEditsSurviveSIGKILLAndReachTheServerWithAnotherWritersChanges() async throws {
        let replica = try TemporaryDirectory("replica-process")
        let serverDirectory = try TemporaryDirectory("server")
        let marker = serverDirectory.path + ".offline"
        defer {
            replica.remove()
            serverDirectory.remove()
            try? FileManager.default.removeItem(atPath: marker)
        }
        let server = try JSONFileDatabase(isolatedDirectory: serverDirectory.url)
        #expect(FileManager.default.createFile(atPath: marker, contents: nil))

        // Edits made offline are flushed (durable in the replica), then the process is killed.
        let first = try await MirrorProcess("A", directory: replica, ["--remote", serverDirectory.path])
        try await first.send("add t1 written offline")
        try await first.send("edit t1 written offline, edited")
        try await first.send("flush")
        first.process.kill(SIGKILL)
        #expect(try await first.process.wait(timeout: testTimeout) == .signaled(SIGKILL))

        // Reopened, still offline: the edits are there.
        let second = try await MirrorProcess("B", directory: replica, ["--remote", serverDirectory.path])
        let mine = Todo(id: "t1", title: "written offline, edited")
        #expect(second.records == [mine])
        await #expect(throws: MirrorError.self) { try await second.send("sync") }

        // Meanwhile another machine wrote to the server.
        let theirs = Todo(id: "t2", title: "from another machine")
        try await server.commit(
            [.save("t2", fields: try JSONEncoder().encode(theirs), baseVersion: 0,
                   timestamp: HLCTimestamp(millis: Int64(Date().timeIntervalSince1970 * 1000)))],
            to: zone)
        #expect(try await todos(on: server) == [theirs])

        // The server is back: the edits reach it once, the other machine's record arrives.
        try FileManager.default.removeItem(atPath: marker)
        try await second.send("sync")
        #expect(try await todos(on: server) == [mine, theirs])
        try await second.waitForRecords("the other machine's record") { $0.sorted() == [mine, theirs] }
        let stored = try #require(try await server.fetch(["t1"], in: zone).first)
        #expect(stored.version == 1)
        #expect(try await second.quit() == 0)
    }
}
