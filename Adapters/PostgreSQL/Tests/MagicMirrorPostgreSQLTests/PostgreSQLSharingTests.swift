import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTestSupport
import MirrorTesting
import PostgresNIO
import Testing

/// Sharing on PostgreSQL, enforced by the server: mirrors in real processes (one role each:
/// `pg-mirror-worker --sharing`) share, edit and revoke; a third role sees nothing, and
/// hostile SQL from it, or from a recipient past what it was given, reads and changes
/// nothing.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLSharingTests {
    typealias Note = PostgreSQLTwoHostsTests.Note

    /// `pg-mirror-worker --sharing` as `role`, on its private or shared zone.
    static func worker(_ role: String, _ scope: Scope, database name: String) async throws -> NoteWorker {
        let process = try Subprocess(
            PackageExecutable.url("pg-mirror-worker"),
            ["--sharing", TestServer.url(database: name, role: role), scope.rawValue], standardInput: true)
        let worker = NoteWorker(name: "\(role) (\(scope))", process: process)
        _ = try await worker.ready()
        return worker
    }

    static func save(_ id: String, _ fields: String, base: Int = 0) -> RecordOperation {
        .save(id, fields: Data(fields.utf8), baseVersion: base, timestamp: .testNow())
    }

    @Test func aShareAnEditAndARevocationReachOtherProcessesAndAThirdRoleSeesNothing() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await opened.open(TestServer.url(database: name))   // the schema's owner
            try await TestServer.withRoles(["alice", "bob", "carol"]) { roles in
                let (alice, bob, carol) = (roles[0], roles[1], roles[2])
                let owner = try await Self.worker(alice, .private, database: name)
                try await owner.send("append t1")
                try await owner.send("set t1 title trip")
                try await owner.send("append t2")
                try await owner.send("set t2 title diary")
                try await owner.send("committed")
                let recipient = try await Self.worker(bob, .shared, database: name)
                let third = try await Self.worker(carol, .shared, database: name)
                try await recipient.waitFor([])

                try await owner.send("share t1 \(bob) readWrite")
                try await recipient.waitFor([Note(id: "t1", title: "trip")])

                try await recipient.send("set t1 title Lisbon")
                try await recipient.send("flush")
                try await owner.waitFor([Note(id: "t1", title: "Lisbon"), Note(id: "t2", title: "diary")])

                try await owner.send("revoke t1 \(bob)")
                try await recipient.waitFor([])
                #expect(try await third.send("state") == "ok []")

                // A read-only share: the edit is refused, by the mirror and by the server.
                try await owner.send("share t2 \(bob) readOnly")
                try await recipient.waitFor([Note(id: "t2", title: "diary")])
                try await recipient.send("set t2 title bob-was-here")
                let refused = await #expect(throws: (any Error).self) { try await recipient.send("flush") }
                #expect(String(describing: refused).contains("refused"), "\(String(describing: refused))")
                try await recipient.waitFor([Note(id: "t2", title: "diary")])
                #expect(try await third.send("state") == "ok []")

                for worker in [owner, recipient, third] { worker.process.kill() }
            }
        }
    }

    @Test func hostileSQLFromAThirdRoleOrARecipientReadsAndChangesNothing() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await opened.open(TestServer.url(database: name))
            try await TestServer.withRoles(["alice", "bob", "carol"]) { roles in
                let (alice, bob, carol) = (roles[0], roles[1], roles[2])
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let asBob = try await opened.open(TestServer.url(database: name, role: bob))
                let alicesZone = ZoneID.private("Note", user: alice)
                try await asAlice.commit(
                    [Self.save("rw", #"{"id":"rw","title":"shared rw"}"#), Self.save("ro", #"{"id":"ro","title":"shared ro"}"#),
                     Self.save("mine", #"{"id":"mine","title":"alice only"}"#)],
                    to: alicesZone)
                try await asAlice.share(["rw"], in: alicesZone, with: try MirrorUser(name: bob), access: .readWrite)
                try await asAlice.share(["ro"], in: alicesZone, with: try MirrorUser(name: bob), access: .readOnly)
                let before = try await asAlice.fetchAll(in: alicesZone).records.sorted { $0.id < $1.id }
                let bobsZone = ZoneID.shared("Note", user: bob)
                let mine = try #require(before.first { $0.id == "mine" })
                let alicesZoneID = try await TestServer.withAdmin(database: name) { client in
                    try await TestServer.count(
                        "SELECT zone_id FROM magicmirror.zones WHERE scope = 'private' AND owner = \(alice)", with: client)
                }
                #expect(Set(try await asBob.fetchAll(in: bobsZone).records.map(\.id)) == ["ro", "rw"])

                // Carol, given nothing.
                try await TestServer.withClient(database: name, role: carol) { client in
                    for table in ["records", "shares"] {
                        let seen = try await TestServer.count(
                            PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM magicmirror.\(table) WHERE owner = '\(alice)'"),
                            with: client)
                        #expect(seen == 0, "carol saw \(seen) rows of \(table)")
                    }
                    #expect(try await TestServer.count(
                        "SELECT count(*)::int8 FROM magicmirror.zones WHERE scope <> 'public'", with: client) == 0)
                    try await client.query(
                        "UPDATE magicmirror.records SET fields = convert_to('{}', 'UTF8') WHERE owner = \(alice)",
                        logger: TestServer.logger)
                    try await client.query(
                        "UPDATE magicmirror.shares SET recipient = \(carol) WHERE owner = \(alice)", logger: TestServer.logger)
                    try await client.query("DELETE FROM magicmirror.shares", logger: TestServer.logger)
                    // Granting itself alice's record, as alice or as itself.
                    for owner in [alice, carol] {
                        await #expect(throws: (any Error).self) {
                            try await client.query(
                                """
                                INSERT INTO magicmirror.shares
                                    (zone_id, owner, record_type, id, recipient, access, created_millis, created_counter)
                                VALUES (\(alicesZoneID), \(owner), 'Note', 'mine', \(carol), 'readWrite',
                                        \(Int(mine.created.millis)), \(Int(mine.created.counter)))
                                """, logger: TestServer.logger)
                        }
                    }
                    await #expect(throws: (any Error).self) {
                        _ = try await client.query("SELECT magicmirror.touch_shared_zone(\(carol), 'Note')", logger: TestServer.logger)
                    }
                }
                let asCarol = try await opened.open(TestServer.url(database: name, role: carol))
                #expect(try await asCarol.fetchAll(in: .shared("Note", user: carol)).records.isEmpty)
                #expect(try await asCarol.fetchAll(in: .shared("Note", user: bob)).records.isEmpty)
                #expect(try await asCarol.fetchAll(in: alicesZone).records.isEmpty)
                await #expect(throws: MirrorError.self) {
                    try await asCarol.commit([Self.save("rw", #"{"title":"carol"}"#, base: 1)], to: alicesZone)
                }

                // Bob, past what he was given: the read-only record, alice's own, the zone's
                // history, another field than those a commit writes.
                try await TestServer.withClient(database: name, role: bob) { client in
                    #expect(try await TestServer.count(
                        PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM magicmirror.records WHERE owner = '\(alice)'"),
                        with: client) == 2)
                    try await client.query(
                        """
                        UPDATE magicmirror.records SET fields = convert_to('{"title":"bob"}', 'UTF8'), version = version + 1
                        WHERE owner = \(alice) AND id IN ('ro', 'mine')
                        """, logger: TestServer.logger)
                    await #expect(throws: (any Error).self) {
                        try await client.query(
                            "UPDATE magicmirror.records SET seq = 0, version = version + 1 WHERE id = 'rw'",
                            logger: TestServer.logger)
                    }
                    await #expect(throws: (any Error).self) {
                        try await client.query(
                            "UPDATE magicmirror.zones SET generation = 0 WHERE owner = \(alice)", logger: TestServer.logger)
                    }
                    // A recipient reads its shares and changes none.
                    try await client.query(
                        "UPDATE magicmirror.shares SET access = 'readWrite' WHERE recipient = \(bob)",
                        logger: TestServer.logger)
                    try await client.query("DELETE FROM magicmirror.shares", logger: TestServer.logger)
                }
                await #expect(throws: MirrorError.self) {
                    try await asBob.commit([Self.save("ro", #"{"id":"ro","title":"bob"}"#, base: 1)], to: bobsZone)
                }
                let after = try await asAlice.fetchAll(in: alicesZone).records.sorted { $0.id < $1.id }
                #expect(after == before)
                #expect(try await asAlice.shares(in: alicesZone).map { "\($0.recordID) \($0.access)" } == ["ro readOnly", "rw readWrite"])

                // Bob's permitted edit goes through.
                let outcome = try await asBob.commit([Self.save("rw", #"{"id":"rw","title":"bob's"}"#, base: 1)], to: bobsZone)
                #expect(outcome.isApplied)
                #expect(try await asAlice.fetch(["rw"], in: alicesZone).first?.fields == Data(#"{"id":"rw","title":"bob's"}"#.utf8))
            }
        }
    }

    @Test func sharingRulesAreTheLibrarysOnTheServerToo() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await opened.open(TestServer.url(database: name))
            try await TestServer.withRoles(["alice", "bob", "carol"]) { roles in
                let (alice, bob, carol) = (roles[0], roles[1], roles[2])
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let asCarol = try await opened.open(TestServer.url(database: name, role: carol))
                let bobUser = try MirrorUser(name: bob)
                let alicesZone = ZoneID.private("Note", user: alice)
                let carolsZone = ZoneID.private("Note", user: carol)
                try await asAlice.commit([Self.save("t1", #"{"id":"t1"}"#)], to: alicesZone)
                try await asCarol.commit([Self.save("t1", #"{"id":"t1","by":"carol"}"#)], to: carolsZone)

                let missing = await #expect(throws: MirrorError.self) {
                    try await asAlice.share(["t1", "nope"], in: alicesZone, with: bobUser, access: .readOnly)
                }
                #expect(missing?.kind == .notFound)
                #expect(try await asAlice.shares(in: alicesZone).isEmpty, "nothing of the call was shared")
                let own = await #expect(throws: MirrorError.self) {
                    try await asAlice.share(["t1"], in: alicesZone, with: try MirrorUser(name: alice), access: .readOnly)
                }
                #expect(own?.kind == .refused)

                try await asAlice.share(["t1"], in: alicesZone, with: bobUser, access: .readOnly)
                let taken = await #expect(throws: MirrorError.self) {
                    try await asCarol.share(["t1"], in: carolsZone, with: bobUser, access: .readOnly)
                }
                #expect(taken?.kind == .refused)

                // Deleting the record ends its share; the same id made again is not shared.
                let stored = try #require(try await asAlice.fetch(["t1"], in: alicesZone).first)
                try await asAlice.commit([.delete("t1", baseVersion: stored.version, timestamp: .testNow())], to: alicesZone)
                let asBob = try await opened.open(TestServer.url(database: name, role: bob))
                #expect(try await asBob.fetchAll(in: .shared("Note", user: bob)).records.isEmpty)
                try await asAlice.commit([Self.save("t1", #"{"id":"t1","again":true}"#, base: stored.version + 1)], to: alicesZone)
                #expect(try await asBob.fetchAll(in: .shared("Note", user: bob)).records.isEmpty)
                // Now carol's can be shared.
                try await asCarol.share(["t1"], in: carolsZone, with: bobUser, access: .readOnly)
                #expect(try await asBob.shares(in: .shared("Note", user: bob)).map(\.owner.name) == [carol])
            }
        }
    }

    @Test func aVersionThreeDatabaseIsMigratedAndItsPrivateRecordsCanBeShared() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await TestServer.withAdmin(database: name) { client in
                try await client.withTransaction(logger: TestServer.logger) { connection in
                    for step in PostgreSQLSchema.migrations[0..<3] {
                        for statement in step { try await connection.query(statement, logger: TestServer.logger) }
                    }
                    try await connection.query("UPDATE magicmirror.meta SET schema_version = 3", logger: TestServer.logger)
                }
            }
            try await TestServer.withRoles(["alice", "bob"]) { roles in
                let admin = try await opened.open(TestServer.url(database: name))
                let zone = ZoneID.private("Note", user: roles[0])
                try await admin.commit([Self.save("t1", #"{"id":"t1"}"#)], to: zone)
                let asAlice = try await opened.open(TestServer.url(database: name, role: roles[0]))
                try await asAlice.share(["t1"], in: zone, with: try MirrorUser(name: roles[1]), access: .readOnly)
                let asBob = try await opened.open(TestServer.url(database: name, role: roles[1]))
                #expect(try await asBob.fetchAll(in: .shared("Note", user: roles[1])).records.map(\.id) == ["t1"])
            }
        }
    }
}
