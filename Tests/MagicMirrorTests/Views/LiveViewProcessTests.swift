import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// A live view in this process follows what other processes (`mirror-worker mirror`) do
/// to the records: they enter, move within and leave it, and its changes say where.
@Suite(.timeLimit(.minutes(5))) struct LiveViewProcessTests {
    typealias Todo = MirrorProcess.Todo

    @Test func aViewFollowsAnotherProcessesEdits() async throws {
        let directory = try TemporaryDirectory("view-processes")
        defer { directory.remove() }
        let worker = try await MirrorProcess("A", directory: directory)
        let mirror = try await Mirror<Todo>(database: try JSONFileDatabase(directory: directory.url))
        // The first two to-dos to buy, by title.
        let shopping = mirror.view(where: RecordFilter { $0.title.hasPrefix("buy") }, sortedBy: \.title, limit: 2)
        let changes = AsyncCollector(shopping.changes())
        func waitForView(_ what: String, _ expected: [String]) async throws {
            try await mirror.waitUntil(timeout: .seconds(120), what) { _ in shopping.records.map(\.title) == expected }
        }

        for command in ["add 1 buy milk", "add 2 call mum", "add 3 buy tea", "flush"] { try await worker.send(command) }
        try await waitForView("two to buy", ["buy milk", "buy tea"])
        try await worker.send("edit 2 buy apples")            // enters at the front
        try await worker.send("flush")
        try await waitForView("apples enter", ["buy apples", "buy milk"])
        try await worker.send("edit 2 buy yeast")             // moves beyond the limit
        try await worker.send("flush")
        try await waitForView("yeast moves down", ["buy milk", "buy tea"])
        try await worker.send("edit 1 milk is bought")        // leaves
        try await worker.send("flush")
        try await waitForView("milk leaves", ["buy tea", "buy yeast"])
        try await worker.send("delete 3")
        try await worker.send("flush")
        try await waitForView("tea is deleted", ["buy yeast"])

        try await changes.wait("every change") { $0.count >= 9 }
        #expect(changes.items == [
            .inserted(at: 0), .inserted(at: 1),                // milk, tea
            .inserted(at: 0), .removed(at: 2),                 // apples push tea out
            .removed(at: 0), .inserted(at: 1),                 // apples → yeast: tea comes back
            .removed(at: 0), .inserted(at: 1),                 // milk leaves: yeast comes in
            .removed(at: 0),                                   // tea is deleted
        ])
        #expect(try await worker.quit() == 0)
    }
}
