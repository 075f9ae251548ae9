import Foundation
import Logging
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Testing

/// The private scope enforced by the server (roles and row-level security), and names that
/// never reach SQL but as parameters.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLSecurityTests {
    private func save(_ id: String, _ fields: String = #"{"v":1}"#, base: Int = 0) -> RecordOperation {
        .save(id, fields: Data(fields.utf8), baseVersion: base, timestamp: .testNow())
    }

    /// Two roles made for this test, dropped after it.
    private func withRoles(_ body: (_ alice: String, _ bob: String) async throws -> Void) async throws {
        try await TestServer.withRoles(["alice", "bob"]) { roles in try await body(roles[0], roles[1]) }
    }

    @Test func anotherRoleCanNeitherSeeNorWriteAPrivateZone() async throws {
        try await TestServer.withDatabase { name, opened in
            // The schema's owner opens the database first and creates the schema.
            let owner = try await opened.open(TestServer.url(database: name))
            try await withRoles { alice, bob in
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let asBob = try await opened.open(TestServer.url(database: name, role: bob))
                let alicesZone = ZoneID.private("Diary", user: alice)
                try await asAlice.commit([save("secret", #"{"text":"alice's"}"#)], to: alicesZone)
                try await asAlice.commit([save("shared")], to: .public("Diary"))

                // Through the API: nothing to read, and no write.
                #expect(try await asBob.fetchAll(in: alicesZone).records.isEmpty)
                #expect(try await asBob.changes(in: alicesZone, since: .initial).records.isEmpty)
                await #expect(throws: MirrorError.self) {
                    try await asBob.commit([save("planted")], to: alicesZone)
                }
                do {
                    try await asBob.commit([save("planted")], to: alicesZone)
                } catch let error as MirrorError {
                    #expect(error.kind == .permissionDenied)
                }
                // Public zones are shared.
                #expect(try await asBob.fetchAll(in: .public("Diary")).records.map(\.id) == ["shared"])

                // Hostile SQL, as bob, straight at the tables.
                let hostile = try PostgreSQLConnectionURL.configuration(
                    from: TestServer.url(database: name, role: bob), environment: [:])
                let client = PostgresClient(configuration: hostile)
                let run = Task { await client.run() }
                defer { run.cancel() }
                var seen = 0
                for try await count in try await client.query(
                    "SELECT count(*)::int8 FROM magicmirror.records WHERE scope = 'private'",
                    logger: TestServer.logger
                ).decode(Int.self) { seen = count }
                #expect(seen == 0, "bob saw \(seen) private rows")
                try await client.query(
                    "UPDATE magicmirror.records SET fields = convert_to('{}', 'UTF8') WHERE owner = \(alice)",
                    logger: TestServer.logger)
                try await client.query(
                    "UPDATE magicmirror.zones SET last_seq = 0 WHERE owner = \(alice)", logger: TestServer.logger)
                await #expect(throws: (any Error).self) {
                    try await client.query(
                        """
                        INSERT INTO magicmirror.records
                            (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer, seq)
                        SELECT zone_id, 'private', \(alice), 'forged', 1, NULL, 0, 0, 'bob', 1
                        FROM magicmirror.zones LIMIT 1
                        """, logger: TestServer.logger)
                }
                await #expect(throws: (any Error).self) {
                    try await client.query("DELETE FROM magicmirror.records", logger: TestServer.logger)
                }
                await #expect(throws: (any Error).self) {
                    try await client.query(
                        "UPDATE magicmirror.records SET owner = \(alice), scope = 'private' WHERE scope = 'public'",
                        logger: TestServer.logger)
                }

                // Alice's records are as she wrote them; the owner of the schema sees them too.
                let alicesRecords = try await asAlice.fetchAll(in: alicesZone).records
                #expect(alicesRecords.map(\.id) == ["secret"])
                #expect(alicesRecords.first?.fields == Data(#"{"text":"alice's"}"#.utf8))
                #expect(try await owner.fetchAll(in: alicesZone).records.map(\.id) == ["secret"])
                #expect(try await asAlice.fetchAll(in: .public("Diary")).records.map(\.id) == ["shared"])

                // Each role reaches its own private scope only.
                try await asAlice.verifyPrivateScope(of: try MirrorUser(name: alice))
                do {
                    try await asBob.verifyPrivateScope(of: try MirrorUser(name: alice))
                    Issue.record("bob's connection reached alice's private scope")
                } catch let error as MirrorError {
                    #expect(error.kind == .accountUnavailable)
                }
            }
        }
    }

    @Test func anotherRoleCanNeitherReadNorRemoveNorPlantPrivateAssets() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await opened.open(TestServer.url(database: name))
            try await withRoles { alice, bob in
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let asBob = try await opened.open(TestServer.url(database: name, role: bob))
                let alicesZone = ZoneID.private("Photo", user: alice)
                let bytes = Data("alice's photo".utf8)
                let asset = try await asAlice.storeAsset(bytes, in: alicesZone)
                let pending = try await asAlice.storeAsset(Data("not referred to".utf8), in: alicesZone)
                let fields = try JSONEncoder().encode(["image": asset])
                try await asAlice.commit(
                    [.save("p", fields: fields, baseVersion: 0, timestamp: .testNow())], to: alicesZone)

                // Through the API: nothing to read, nothing to collect, nowhere to store.
                do {
                    _ = try await asBob.fileURL(for: asset, in: alicesZone)
                    Issue.record("bob reached alice's asset")
                } catch let error as MirrorError {
                    #expect(error.kind == .notFound)
                }
                await #expect(throws: MirrorError.self) {
                    for try await _ in asBob.contents(of: asset, in: alicesZone, chunkSize: 4) {}
                }
                #expect(try await asBob.removeUnreferencedAssets(in: alicesZone) == 0)
                do {
                    _ = try await asBob.storeAsset(Data("planted".utf8), in: alicesZone)
                    Issue.record("bob stored an asset in alice's zone")
                } catch let error as MirrorError {
                    #expect(error.kind == .permissionDenied)
                }

                // Hostile SQL, as bob, straight at the tables.
                let hostile = try PostgreSQLConnectionURL.configuration(
                    from: TestServer.url(database: name, role: bob), environment: [:])
                let client = PostgresClient(configuration: hostile)
                let run = Task { await client.run() }
                defer { run.cancel() }
                for table in ["assets", "asset_chunks", "asset_holds"] {
                    var seen = -1
                    for try await count in try await client.query(
                        PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM magicmirror.\(table) WHERE scope = 'private'"),
                        logger: TestServer.logger
                    ).decode(Int.self) { seen = count }
                    #expect(seen == 0, "bob saw \(seen) private rows of \(table)")
                }
                try await client.query("DELETE FROM magicmirror.asset_chunks", logger: TestServer.logger)
                try await client.query("DELETE FROM magicmirror.assets", logger: TestServer.logger)
                try await client.query("DELETE FROM magicmirror.asset_holds", logger: TestServer.logger)
                await #expect(throws: (any Error).self) {
                    try await client.query(
                        """
                        INSERT INTO magicmirror.asset_chunks (content, n, scope, owner, data)
                        VALUES (1, 99, 'private', \(alice), '\\x00'::bytea)
                        """, logger: TestServer.logger)
                }

                // Alice's assets are whole, and the one she has not referred to yet is kept.
                var read = Data()
                for try await piece in asAlice.contents(of: asset, in: alicesZone, chunkSize: 4) { read.append(piece) }
                #expect(read == bytes)
                #expect(try await asAlice.removeUnreferencedAssets(in: alicesZone) == 0)
                _ = try await asAlice.fileURL(for: pending, in: alicesZone)
            }
        }
    }

    @Test func injectionShapedNamesAndFieldsAreOnlyData() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let hostile = [
                "'; DROP TABLE magicmirror.records; --",
                "\"; DELETE FROM magicmirror.zones; --",
                "x' OR '1'='1",
                "$1", "\\", "%s%n", "Robert'); DROP TABLE Students;--", "e\u{301}", "\u{e9}", "🙂",
            ]
            for (index, text) in hostile.enumerated() {
                let fields = try JSONSerialization.data(withJSONObject: ["title": text], options: [.sortedKeys])
                // Record types and user names must be in NFC (they may name directories);
                // any spelling is a record id of its own.
                let isNFC = text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8)
                let zones: [ZoneID] = isNFC ? [.public(text), .private("Todo", user: text), .public("Todo")] : [.public("Todo")]
                if !isNFC {
                    await #expect(throws: MirrorError.self, "a decomposed record type is refused") {
                        try await database.commit([save(text, String(decoding: fields, as: UTF8.self))], to: .public(text))
                    }
                }
                for zone in zones {
                    let outcome = try await database.commit([save(text, String(decoding: fields, as: UTF8.self))], to: zone)
                    #expect(outcome.isApplied, "commit \(index) to \(zone)")
                    let fetched = try await database.fetch([text], in: zone)
                    #expect(fetched.map(\.id) == [text], "\(zone)")
                    #expect(fetched.first?.fields == fields)
                }
            }
            // Every name stayed a value: the tables are there, each zone holds what it was given.
            #expect(try await database.fetchAll(in: .public("Todo")).records.count == hostile.count)
            for text in hostile where text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8) {
                #expect(try await database.fetchAll(in: .public(text)).records.map(\.id) == [text])
                #expect(try await database.fetchAll(in: .private("Todo", user: text)).records.map(\.id) == [text])
            }
        }
    }
}
