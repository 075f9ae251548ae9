import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Live queries" article (Sources/MagicMirror/Documentation.docc/
// LiveQueries.md), compiled and run. Its blocks appear here exactly as in the article,
// which is why they are not indented; Tests/MirrorTestingTests/LiveViewArticleTests.swift checks
// that every block of the article is here.

enum LiveQueriesArticle {
struct Todo: Recordable {
    var id = UUID()
    var title: String
    var done = false
    var priority = 0
    var created = Date()
    var position = 0.0
}
}

@Suite(.timeLimit(.minutes(5))) struct LiveViewArticleTests {
    typealias Todo = LiveQueriesArticle.Todo

    @Test func theArticlesExamplesRun() async throws {
        let database = InMemoryDatabase()
        try await database.simulateSave(Todo(title: "Call mum", priority: 3))

let todos = try await Mirror<Todo>(database: database)
let open = todos.view(where: \.done == false, sortedBy: \.created, limit: 50)
let urgent = todos.view(where: \.done == false && \.priority >= 2, sortedBy: .descending(\.priority))
let milk = todos.view(where: RecordFilter { $0.title.lowercased().contains("milk") })

        #expect(open.records.map(\.title) == ["Call mum"])
        #expect(urgent.count == 1)
        #expect(milk.isEmpty)
        let changes = AsyncCollector(open.changes())

open.append(Todo(title: "Buy milk", priority: 2))
open[0].done = true

        // "Call mum" was done; "Buy milk" is the only open to-do, and the most urgent.
        #expect(open.records.map(\.title) == ["Buy milk"])
        #expect(urgent.records.map(\.title) == ["Buy milk"])
        #expect(milk.records.map(\.title) == ["Buy milk"])
        #expect(todos.dataModel.map(\.title) == ["Call mum", "Buy milk"])
        try await changes.wait("two changes") { $0.count >= 2 }
        #expect(changes.items == [.inserted(at: 1), .removed(at: 0)])

let openChanges = open.changes()   // made here: it holds the changes from now on
let rows = Task {
    for await change in openChanges {
        switch change {
        case .inserted(let position): print("insert row", position)
        case .removed(let position): print("delete row", position)
        case .moved(let from, let to): print("move row", from, "to", to)   // an .updated follows
        case .updated(let position): print("reload row", position)
        }
    }
}

        open[0].title = "Buy oat milk"
        try await todos.flush()
        rows.cancel()
        await rows.value
        #expect(try await database.fetchAll(in: .public("Todo")).records.count == 2)

        todos.dataModel[0].position = 1
        todos.dataModel.append(Todo(title: "Post the letter", position: 2))
        // By position: Buy oat milk (0), Call mum (1), Post the letter (2).

let list = todos.view(sortedBy: \.position)
list.move(from: 2, to: 0, orderKey: \.position)

        #expect(list.records.map(\.title) == ["Post the letter", "Buy oat milk", "Call mum"])
        try await todos.flush()
        let reopened = try await Mirror<Todo>(database: database.writer(named: "another process"))
        #expect(reopened.view(sortedBy: \.position).records.map(\.title) == list.records.map(\.title))
    }
}
