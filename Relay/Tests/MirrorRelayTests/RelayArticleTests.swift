import Foundation
import MagicMirror
import MagicMirrorRelay
import Testing

/// The article "The relay": its app's side, run against a real relay.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayArticleTests {
    struct Todo: Recordable {
        var id = UUID()
        var title: String
        var done = false
    }

    /// What the article's app has: its user's sign-in, which hands out tokens.
    struct SignIn: Sendable {
        let subject: String
        func currentToken() async throws -> String { try await RelayTestServer.token(subject) }
    }

    /// The article's block, as an app runs it: a private mirror, opened without a user, is
    /// the token's subject's, and its edits reach the relay.
    private static func openTodos(relayURL: URL, user: MirrorUser, signIn: SignIn, replicaDirectory: URL) async throws
        -> (Mirror<Todo>, ReplicatedDatabase)
    {
// The article's block, unindented, exactly as printed:
let relay = RelayDatabase(url: relayURL, user: user) {
    try await signIn.currentToken()  // a JWT for `user`, from the app's sign-in service
}
let database = ReplicatedDatabase(local: try JSONFileDatabase(directory: replicaDirectory), remote: relay)
let todos = try await Mirror<Todo>(database: database, scope: .private)
        return (todos, database)
    }

    @Test func theAppsPrivateMirrorIsTheTokensSubjects() async throws {
        try await RunningRelay.with { relay in
            let subject = RelayTestServer.uniqueName("reader")
            let user = try MirrorUser(name: subject)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-article-" + UUID().uuidString)
            defer { try? FileManager.default.removeItem(at: directory) }
            let (todos, database) = try await Self.openTodos(
                relayURL: relay.url, user: user, signIn: SignIn(subject: subject), replicaDirectory: directory)
            todos.dataModel.append(Todo(title: "Buy milk"))
            try await todos.flush()
            try await database.synchronize()
            // On the relay, in the subject's private zone (seen through another client of theirs).
            let stored = try await relay.client(subject).fetchAll(in: .private("Todo", user: subject))
            #expect(stored.records.count == 1)
            #expect(database.connectedUser == user)
        }
    }
}
