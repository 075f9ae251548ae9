import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Sharing records with other users" article (Sources/MagicMirror/
// Documentation.docc/SharingRecords.md), compiled and run on a JSON-file database. Blocks
// appear here exactly as in the article, which is why they are not indented;
// Tests/MirrorTestingTests/SharingRecordsArticleTests.swift checks that every block of the
// article is here.

enum SharingRecordsArticle {
struct Todo: Recordable {
    var id = UUID()
    var title: String
}
}

@Suite(.timeLimit(.minutes(5))) struct SharingRecordsArticleTests {
    typealias Todo = SharingRecordsArticle.Todo

    @Test func theArticleRuns() async throws {
        let directory = try TemporaryDirectory("sharing-article")
        defer { directory.remove() }
        let database = try JSONFileDatabase(directory: directory.url)

let alice = try MirrorUser(name: "alice")
let bob = try MirrorUser(name: "bob")
let mine = try await Mirror<Todo>(database: database, scope: .private, user: alice)
let trip = Todo(title: "Plan the trip")
mine.dataModel.append(trip)
try await mine.share(trip.recordID, with: [bob], access: .readWrite)

let sharedWithBob = try await Mirror<Todo>(database: database, scope: .shared, user: bob)
sharedWithBob.dataModel[recordID: trip.recordID]?.title = "Plan the trip to Lisbon"
try await sharedWithBob.flush()     // committed to alice's record

        try await mine.waitUntil(timeout: .seconds(120)) { $0.first?.title == "Plan the trip to Lisbon" }
        #expect(try await mine.shares().map(\.access) == [.readWrite])

for share in try await mine.shares() {
    print(share.recordID, share.recipient, share.access)
}
try await mine.revokeShare(of: trip.recordID, from: [bob])

        try await sharedWithBob.waitUntil(timeout: .seconds(120)) { $0.isEmpty }

sharedWithBob.dataModel.append(Todo(title: "Bob's own idea"))
do {
    try await sharedWithBob.flush()
} catch MirrorError.Kind.refused {
    // The shared scope holds other users' records only: the new record is gone.
}
        #expect(sharedWithBob.lastError?.kind == .refused)
        try await sharedWithBob.waitUntil(timeout: .seconds(120)) { $0.isEmpty }
        #expect(mine.dataModel.count == 1)
    }
}
