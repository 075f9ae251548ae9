import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Working offline" article (Sources/MagicMirror/Documentation.docc/
// WorkingOffline.md), compiled and run. Its blocks appear here exactly as in the article,
// which is why they are not indented; Tests/MirrorTestingTests/WorkingOfflineArticleTests.swift
// checks that every block of the article is here.

enum WorkingOfflineArticle {
struct Todo: Recordable {
    var id = UUID()
    var title: String
    var done = false
}
}

@Suite(.timeLimit(.minutes(5))) struct WorkingOfflineArticleTests {
    typealias Todo = WorkingOfflineArticle.Todo

    @Test func theArticlesExamplesRun() async throws {
        let directory = try TemporaryDirectory("offline-article")
        defer { directory.remove() }
        let replicaDirectory = directory.url
        let server = InMemoryDatabase()
        try await server.simulateSave(Todo(title: "Call mum"))
        server.availability = .unavailable

let replicated = ReplicatedDatabase(
    local: try JSONFileDatabase(directory: replicaDirectory),
    remote: server)
let todos = try await Mirror<Todo>(database: replicated)   // from the replica, at once

        // A new replica, the server away: the mirror opens, empty.
        #expect(todos.dataModel.isEmpty)
        let phases = AsyncCollector(replicated.statusUpdates)

let banner = Task {
    for await status in replicated.statusUpdates {
        switch status.phase {
        case .online: print("up to date")
        case .syncing: print("sending \(status.pendingChanges) changes")
        case .offline: print("offline; \(status.pendingChanges) changes will be sent later")
        }
    }
}

        try await phases.wait("offline") { $0.contains { $0.phase == .offline } }
        // Offline, a change is durable locally, and waits.
        todos.dataModel.append(Todo(title: "Pay rent"))
        try await todos.flush()
        await #expect(throws: MirrorError.self) { try await replicated.synchronize() }
        #expect(replicated.status.pendingChanges == 1)
        server.availability = .available

todos.dataModel.append(Todo(title: "Buy milk"))
try await todos.flush()              // durable in the replica, online or not
try await replicated.synchronize()   // accepted by the server

        let onServer = try await server.fetchAll(in: .public("Todo")).records.count
        #expect(onServer == 3)
        try await waitUntil(todos, "the server's record") { $0.count == 3 }
        #expect(replicated.status.pendingChanges == 0)
        #expect(replicated.status.phase == .online)
        banner.cancel()
        await banner.value
    }
}
