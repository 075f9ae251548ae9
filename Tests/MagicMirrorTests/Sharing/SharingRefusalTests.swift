import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// What a recipient may not do through a shared mirror — edit a record shared read-only,
/// create a record, delete one — is refused (`MirrorError.Kind.refused`): the mirror drops
/// the change, shows the stored record again, and reports the error once; the owner's
/// records are untouched.
@Suite(.timeLimit(.minutes(5))) struct SharingRefusalTests {
    typealias Todo = SharingTests.Todo

    /// Alice's `id`, shared with bob with `access`, and bob's shared mirror showing it.
    static func shared(
        _ id: String, access: ShareAccess, _ database: any RecordDatabase
    ) async throws -> (alice: Mirror<Todo>, bob: Mirror<Todo>) {
        let alice = try await SharingTests.privateMirror(SharingTests.alice, database)
        alice.dataModel.append(Todo(id: id, title: "original"))
        try await alice.share(id, with: [SharingTests.bob], access: access)
        let bob = try await SharingTests.sharedMirror(SharingTests.bob, database)
        #expect(bob.dataModel.array == [Todo(id: id, title: "original")])
        return (alice, bob)
    }

    @Test(arguments: DatabaseFactory.all)
    func anEditOfARecordSharedReadOnlyIsRefusedAndUndone(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let id = "ro-" + UUID().uuidString
        let recorder = ErrorNotificationRecorder { $0.recordIDs.contains(id) }
        let (alice, bob) = try await Self.shared(id, access: .readOnly, opened.database)

        bob.dataModel[0].title = "bob was here"
        let error = await #expect(throws: MirrorError.self) { try await bob.flush() }
        #expect(error?.kind == .refused)
        #expect(error?.recordIDs == [id])
        #expect(error?.message.contains("read-only") == true, "\(String(describing: error))")
        try await bob.waitUntil(timeout: SharingTests.timeout, "the stored title again") {
            $0.array == [Todo(id: id, title: "original")]
        }
        #expect(bob.pendingChanges.isEmpty)
        try await recorder.waitForErrors(count: 1, timeout: SharingTests.timeout)
        try await bob.flush()
        #expect(recorder.count == 1, "\(recorder.errors)")
        #expect(alice.dataModel.array == [Todo(id: id, title: "original")])
        let stored = try #require(try await opened.database.fetch([id], in: .private("Todo", user: "alice")).first)
        #expect(stored.version == 1)
    }

    @Test(arguments: DatabaseFactory.all)
    func aRecipientCreatesAndDeletesNothing(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let (alice, bob) = try await Self.shared("rw", access: .readWrite, opened.database)

        bob.dataModel.append(Todo(id: "new", title: "made by bob"))
        let created = await #expect(throws: MirrorError.self) { try await bob.flush() }
        #expect(created?.kind == .refused)
        #expect(created?.recordIDs == ["new"])
        try await bob.waitUntil(timeout: SharingTests.timeout, "no record made by bob") { $0.map(\.id) == ["rw"] }

        bob.dataModel.removeAll()
        let deleted = await #expect(throws: MirrorError.self) { try await bob.flush() }
        #expect(deleted?.kind == .refused)
        #expect(deleted?.recordIDs == ["rw"])
        try await bob.waitUntil(timeout: SharingTests.timeout, "the record back") { $0.map(\.id) == ["rw"] }
        #expect(alice.dataModel.map(\.id) == ["rw"])
        #expect(try await opened.database.fetchAll(in: .private("Todo", user: "bob")).records.isEmpty)
        #expect(try await opened.database.fetchAll(in: .private("Todo", user: "alice")).records.count == 1)
    }

    @Test(arguments: DatabaseFactory.all)
    func aRawCommitToASharedZoneStoresNothingItMayNot(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        _ = try await Self.shared("r1", access: .readOnly, opened.database)
        let stored = try #require(try await opened.database.fetch(["r1"], in: .private("Todo", user: "alice")).first)
        let save = RecordOperation.save(
            "r1", fields: Data(#"{"id":"r1","title":"raw"}"#.utf8), baseVersion: stored.version,
            timestamp: HLCTimestamp(millis: 1))
        // Carol, to whom nothing is shared, and bob, read-only.
        for zone in [ZoneID.shared("Todo", user: "carol"), .shared("Todo", user: "bob")] {
            let error = await #expect(throws: MirrorError.self) { try await opened.database.commit([save], to: zone) }
            #expect(error?.kind == .refused)
            #expect(error?.nothingStored == true)
        }
        #expect(try await opened.database.fetch(["r1"], in: .private("Todo", user: "alice")) == [stored])
    }
}
