import Foundation
import Logging
import MagicMirror
@testable import MagicMirrorPostgreSQL
import PostgresNIO
import Testing

/// Commits that read their zone, then wait for its row while another transaction changes
/// the zone: a commit that slipped in between, or a collection that removes an asset.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLCommitRaceTests {
    /// Another writer's commit lands while this commit, which read the record's version
    /// before, waits for the zone's row: this commit must see it and conflict, not
    /// overwrite it.
    @Test func aCommitThatSlippedInBetweenMakesTheWaitingCommitConflict() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let zone = ZoneID.public("Todo")
            try await database.commit(
                [.save("a", fields: Data(#"{"v":1}"#.utf8), baseVersion: 0, timestamp: .testNow())], to: zone)
            let commit = try await TestServer.whileHoldingZone(
                "Todo", database: name,
                [
                    // Another writer's commit of version 2, as the server would store it.
                    """
                    WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                         moved AS (UPDATE magicmirror.zones SET last_seq = (SELECT seq FROM drawn)
                                   WHERE record_type = 'Todo')
                    UPDATE magicmirror.records SET version = 2, fields = convert_to('{"v":2}', 'UTF8'),
                           writer = 'other', seq = (SELECT seq FROM drawn)
                    WHERE id = 'a'
                    """,
                ]
            ) {
                try await database.commit(
                    [.save("a", fields: Data(#"{"v":3}"#.utf8), baseVersion: 1, timestamp: .testNow())], to: zone)
            }
            let outcome = try await commit.value
            #expect(!outcome.isApplied)
            let stored = try await database.fetch(["a"], in: zone).first
            #expect(stored?.version == 2)
            #expect(stored?.fields == Data(#"{"v":2}"#.utf8))
        }
    }

    /// A collection holds the zone's row and removes an asset while a commit that refers to
    /// it waits for the row, after reading the zone: the commit must see the removal (the
    /// zone's assets epoch moved) and be refused, not store a record pointing at nothing.
    @Test func aCommitWaitingOnACollectionThatRemovesItsAssetIsRefused() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let zone = ZoneID.public("Photo")
            let asset = try await database.storeAsset(Data("soon gone".utf8), in: zone)
            let fields = try JSONEncoder().encode(["image": asset])
            // What a collection does, held open: lock the zone, remove the asset.
            let commit = try await TestServer.whileHoldingZone(
                "Photo", database: name,
                [
                    "DELETE FROM magicmirror.assets WHERE digest = \(asset.digest)",
                    "UPDATE magicmirror.zones SET assets_epoch = assets_epoch + 1 WHERE record_type = 'Photo'",
                ]
            ) {
                try await database.commit(
                    [.save("p", fields: fields, baseVersion: 0, timestamp: .testNow())], to: zone)
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
