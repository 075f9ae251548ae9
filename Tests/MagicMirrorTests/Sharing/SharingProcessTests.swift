import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// Sharing between real processes on one JSON-file database (`mirror-worker mirror`, one
/// process per user): alice shares, bob reads and edits in his shared mirror, alice revokes
/// while bob's mirror is open, and carol, given nothing, sees nothing throughout.
@Suite(.timeLimit(.minutes(5))) struct SharingProcessTests {
    typealias Todo = MirrorProcess.Todo

    static func owner(_ name: String, _ directory: TemporaryDirectory) async throws -> MirrorProcess {
        try await MirrorProcess(name, directory: directory, ["--user", name])
    }

    static func recipient(_ name: String, _ directory: TemporaryDirectory) async throws -> MirrorProcess {
        try await MirrorProcess(name, directory: directory, ["--user", name, "--shared"])
    }

    @Test func aShareAnEditAndARevocationReachOpenMirrorsInOtherProcesses() async throws {
        let directory = try TemporaryDirectory("sharing-processes")
        defer { directory.remove() }
        let alice = try await Self.owner("alice", directory)
        try await alice.send("add t1 Plan the trip")
        try await alice.send("add t2 Alice's diary")
        try await alice.send("flush")
        let bob = try await Self.recipient("bob", directory)
        let carol = try await Self.recipient("carol", directory)
        #expect(bob.records.isEmpty)

        try await alice.send("share t1 bob readWrite")
        try await bob.waitForRecords("t1 shared by alice") { $0 == [Todo(id: "t1", title: "Plan the trip")] }

        try await bob.send("edit t1 Plan the trip to Lisbon")
        try await bob.send("flush")
        try await alice.waitForRecords("bob's edit") { $0.first == Todo(id: "t1", title: "Plan the trip to Lisbon") }

        try await alice.send("revoke t1 bob")
        try await bob.waitForRecords("t1 gone while bob's mirror is open") { $0.isEmpty }
        #expect(alice.records.count == 2, "the owner keeps the record")

        // Carol never saw a record: not in any state she printed, not in her shares.
        try await carol.send("flush")
        let carolsStates = carol.lines.items.filter { $0.hasPrefix("state ") }
        #expect(!carolsStates.isEmpty)
        #expect(carolsStates.allSatisfy { $0.hasSuffix(" []") }, "\(carolsStates)")
        let before = carol.lines.items.count
        try await carol.send("shares")
        #expect(!carol.lines.items[before...].contains { $0.hasPrefix("share ") })
        for process in [alice, bob, carol] { #expect(try await process.quit() == 0) }
    }

    @Test func aReadOnlyEditInAnotherProcessIsRefusedAndTheOwnersRecordKept() async throws {
        let directory = try TemporaryDirectory("sharing-read-only")
        defer { directory.remove() }
        let alice = try await Self.owner("alice", directory)
        try await alice.send("add t1 original")
        try await alice.send("share t1 bob readOnly")
        let bob = try await Self.recipient("bob", directory)
        #expect(bob.records == [Todo(id: "t1", title: "original")])

        // The edit shows at once, is refused in the background (the mirror drops it), and the
        // stored title shows again.
        try await bob.send("edit t1 bob was here")
        try await bob.waitForRecords("the stored title again") { $0 == [Todo(id: "t1", title: "original")] }
        #expect(bob.lines.items.contains { $0.hasPrefix("state ") && $0.contains("bob was here") })

        // A new bob process reads what is stored: alice's title.
        #expect(try await bob.quit() == 0)
        let reopened = try await Self.recipient("bob", directory)
        #expect(reopened.records == [Todo(id: "t1", title: "original")])
        try await alice.send("flush")
        #expect(alice.records == [Todo(id: "t1", title: "original")])
        for process in [alice, reopened] { #expect(try await process.quit() == 0) }
    }

    @Test func hostileUserNamesAreRefusedAndWriteNothingOutsideTheDatabase() async throws {
        let directory = try TemporaryDirectory("sharing-hostile")
        defer { directory.remove() }
        let alice = try await Self.owner("alice", directory)
        try await alice.send("add t1 original")
        try await alice.send("flush")
        for name in ["..", ".", "../../etc", "a/b"] {
            await #expect(throws: MirrorError.self) { try await alice.send("share t1 \(name) readOnly") }
        }
        await #expect(throws: MirrorError.self) { try await alice.send("share t1 alice readOnly") }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(!names.contains("shared"), "no grant was written: \(names)")
        #expect(try await alice.quit() == 0)

        // A recipient process with a hostile name does not start.
        let hostile = try Subprocess(
            try JSONFileTestSupport.workerExecutable(),
            ["mirror", "--db", directory.path, "--user", "../alice", "--shared"],
            inheritStandardError: false, standardInput: true)
        let status = try await hostile.wait(timeout: testTimeout).status
        #expect(status != 0)
    }
}
