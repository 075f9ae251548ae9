import Foundation
import Logging
import MagicMirror
@testable import MagicMirrorPostgreSQL
import PostgresNIO
import Testing

/// A collection and a commit that refers to an asset it removes, interleaved on the server.
@Suite(.enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLAssetRaceTests {
    /// A collection holds the zone's row and removes an asset while a commit that refers to
    /// it waits for the row, after reading the zone: the commit must see the removal (the
    /// zone's assets epoch moved) and be refused, not store a record pointing at nothing.
    @Test func aCommitWaitingOnACollectionThatRemovesItsAssetIsRefused() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let zone = ZoneID.public("Photo")
            let asset = try await database.storeAsset(Data("soon gone".utf8), in: zone)
            let fields = try JSONEncoder().encode(["image": asset])
            let commit = try await TestServer.withAdmin(database: name) { client in
                try await client.withTransaction(logger: TestServer.logger) { connection in
                    // What a collection does, held open: lock the zone, remove the asset.
                    try await connection.query(
                        "SELECT 1 FROM magicmirror.zones WHERE record_type = 'Photo' FOR UPDATE", logger: TestServer.logger)
                    try await connection.query(
                        "DELETE FROM magicmirror.assets WHERE digest = \(asset.digest)", logger: TestServer.logger)
                    try await connection.query(
                        "UPDATE magicmirror.zones SET assets_epoch = assets_epoch + 1 WHERE record_type = 'Photo'",
                        logger: TestServer.logger)
                    let commit = Task {
                        try await database.commit(
                            [.save("p", fields: fields, baseVersion: 0, timestamp: .testNow())], to: zone)
                    }
                    // Wait until the commit's write waits for the zone's row.
                    let deadline = ContinuousClock.now + .seconds(60)
                    var waiting = false
                    while !waiting, ContinuousClock.now < deadline {
                        for try await count in try await client.query(
                            """
                            SELECT count(*)::int8 FROM pg_stat_activity
                            WHERE datname = current_database() AND wait_event_type = 'Lock'
                            """, logger: TestServer.logger
                        ).decode(Int.self) { waiting = count > 0 }
                        if !waiting { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    #expect(waiting, "the commit never waited for the zone's row")
                    return commit // the collection commits now, and the commit goes on
                }
            }
            do {
                _ = try await commit.value
                Issue.record("a record was committed that refers to an asset the collection removed")
            } catch let error as MirrorError {
                #expect(error.kind == .notFound)
                #expect(error.nothingStored)
            }
            #expect(try await database.fetchAll(in: zone).records.isEmpty)
        }
    }
}
