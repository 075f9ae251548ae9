import Foundation
import MagicMirror
import MirrorTesting
import Observation
import Testing

// The code of the article "Apple Platforms and User Interfaces" (Sources/MagicMirror/
// Documentation.docc/ApplePlatforms.md), compiled and run on Linux with Observation. Its
// blocks appear here exactly as in the article, which is why they are not indented.

enum ApplePlatformsArticle {
struct Todo: Recordable {
    var id = UUID()
    var title: String
    var done = false
}

@MainActor @Observable
final class TodoListModel {
    private(set) var todos: [Todo] = []
    private(set) var open: [Todo] = []
    @ObservationIgnored private let mirror: Mirror<Todo>
    @ObservationIgnored private let openView: LiveView<Todo>
    @ObservationIgnored private var observation: MirrorCancellable?

    init(mirror: Mirror<Todo>) {
        self.mirror = mirror
        self.openView = mirror.view(where: \.done == false, sortedBy: \.title)
        observation = mirror.observeOnMainActor { [weak self] todos in
            guard let self else { return }
            self.todos = todos
            self.open = self.openView.records
        }
    }

    func add(_ title: String) {
        mirror.dataModel.append(Todo(title: title))
    }
}
}

/// A `@MainActor @Observable` model over a mirror and a live view follows local and remote
/// changes on the main actor (issue #36, point 5).
@MainActor @Suite(.timeLimit(.minutes(5))) struct ApplePlatformsArticleTests {
    typealias Todo = ApplePlatformsArticle.Todo
    typealias TodoListModel = ApplePlatformsArticle.TodoListModel

    struct TimedOut: Error, CustomStringConvertible { var description: String }

    /// Waits, through Observation, until `condition` holds: each change of what it reads
    /// wakes it; it gives up after a generous timeout.
    private func waitUntil(_ what: String, _ condition: @escaping @MainActor () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(description: "timed out waiting for \(what)") }
            let (changed, continuation) = AsyncStream.makeStream(of: Void.self)
            withObservationTracking { _ = condition() } onChange: { continuation.finish() }
            let timeout = Task {
                try? await Task.sleep(for: .seconds(60))
                continuation.finish()
            }
            for await _ in changed {}
            timeout.cancel()
        }
    }

    @Test func theModelFollowsLocalAndRemoteChangesOnTheMainActor() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Todo>(database: database)
        let model = TodoListModel(mirror: mirror)
        #expect(model.todos.isEmpty && model.open.isEmpty)

        model.add("Walk the dog")
        try await waitUntil("the local change") { model.todos.count == 1 }
        #expect(model.open.map(\.title) == ["Walk the dog"])

        // Another process adds one; it arrives on a background task, the model hears it on
        // the main actor.
        try await database.writer(named: "another process").simulateSave(Todo(title: "Buy milk", done: false))
        try await waitUntil("the remote change") { model.todos.count == 2 }
        #expect(model.open.map(\.title) == ["Buy milk", "Walk the dog"])

        mirror.dataModel[0].done = true
        try await waitUntil("the edit") { model.open.count == 1 }
        #expect(model.open.map(\.title) == ["Buy milk"])
    }

    @Test func theHandlerRunsOnTheMainActorForRemoteChanges() async throws {
        let database = InMemoryDatabase()
        let mirror = try await Mirror<Todo>(database: database)
        let seen = Recorded()
        let observation = mirror.observeOnMainActor { todos in
            // The executor it runs on, checked at run time: stops the test run if it is not
            // the main actor's.
            MainActor.preconditionIsolated("observeOnMainActor's handler")
            seen.append(todos.count)
        }
        defer { observation.cancel() }
        try await database.writer(named: "another process").simulateSave(Todo(title: "from elsewhere"))
        try await waitUntil("the remote record") { seen.counts.last == 1 }
        #expect(seen.counts == [0, 1])
    }
}

/// What the handler saw, on the main actor.
@MainActor @Observable final class Recorded {
    private(set) var counts: [Int] = []
    func append(_ count: Int) { counts.append(count) }
}
