import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
@_spi(RelayProtocol) import MagicMirrorRelay
import MirrorTesting
import Testing

/// The public ``AssetDatabaseConformance`` suite on `RelayDatabase`, through a real relay on
/// a fresh database for each check, every writer one user's.
@Suite(.timeLimit(.minutes(10)), .serialized, .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayAssetConformanceTests {
    @Test(arguments: AssetDatabaseConformance.checks)
    func conforms(to check: ConformanceCheck) async throws {
        let subject = RelayTestServer.uniqueName("user")
        try await check.run {
            let relay = try await RunningRelay.start()
            return DatabaseUnderTest(
                database: relay.client(subject), otherWriter: { relay.client(subject) }, startNewGeneration: { _ in },
                cleanup: { await relay.stop() })
        }
    }
}

/// Assets through the relay, streamed both ways: uploads up to the relay's limit, downloads
/// checked by the client, and another user's assets refused.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayAssetTests {
    /// `count` bytes that are not all alike.
    static func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }) }

    /// A temporary file holding `data`.
    static func file(_ data: Data) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relay-asset-test-" + UUID().uuidString)
        try data.write(to: url)
        return url
    }

    /// The assets stored in the relay's database, as `owner size`.
    static func storedAssets(_ relay: RunningRelay) async throws -> [String] {
        try await RelayTestServer.admin(
            "SELECT owner || ' ' || size FROM magicmirror.assets ORDER BY 1", database: relay.database)
    }

    @Test func aFileGoesUpAndComesBackStreamedAndCheckedEachTime() async throws {
        try await RunningRelay.with { relay in
            let aliceName = RelayTestServer.uniqueName("alice")
            let alice = relay.client(aliceName)
            let zone = ZoneID.private("Photo", user: aliceName)
            let bytes = Self.bytes(3 * 1024 * 1024 + 7)
            let source = try Self.file(bytes)
            defer { try? FileManager.default.removeItem(at: source) }

            let asset = try await alice.storeAsset(contentsOf: source, in: zone)

            #expect(asset.size == bytes.count)
            #expect(try await Self.storedAssets(relay) == ["\(aliceName) \(bytes.count)"])
            var pieces: [Data] = []
            for try await piece in alice.contents(of: asset, in: zone, chunkSize: 1_000_000) { pieces.append(piece) }
            #expect(pieces.map(\.count) == [1_000_000, 1_000_000, 1_000_000, 145_735])
            #expect(pieces.reduce(Data(), +) == bytes)
            let url = try await alice.fileURL(for: asset, in: zone)
            #expect(try Data(contentsOf: url) == bytes)
            #expect(try await alice.fileURL(for: asset, in: zone) == url)
            // A file that cannot be read: nothing is sent.
            let missing = try await #require(throws: MirrorError.self) {
                try await alice.storeAsset(contentsOf: source.appendingPathExtension("missing"), in: zone)
            }
            #expect(missing.kind == .notFound)
            #expect(try await Self.storedAssets(relay) == ["\(aliceName) \(bytes.count)"])
            // The relay is asked every time: once the asset is gone from the server, the copy
            // this client holds is not handed out.
            _ = try await RelayTestServer.admin("DELETE FROM magicmirror.asset_holds", database: relay.database)
            _ = try await RelayTestServer.admin("DELETE FROM magicmirror.assets", database: relay.database)
            let gone = try await #require(throws: MirrorError.self) { try await alice.fileURL(for: asset, in: zone) }
            #expect(gone.kind == .notFound)
        }
    }

    @Test func bytesChangedOnTheServerAreACorruptEntry() async throws {
        try await RunningRelay.with { relay in
            let aliceName = RelayTestServer.uniqueName("alice")
            let alice = relay.client(aliceName)
            let zone = ZoneID.private("Photo", user: aliceName)
            let asset = try await alice.storeAsset(Self.bytes(100_000), in: zone)
            _ = try await RelayTestServer.admin(
                "UPDATE magicmirror.asset_chunks SET data = set_byte(data, 0, (get_byte(data, 0) + 1) % 256)",
                database: relay.database)
            let read = try await #require(throws: MirrorError.self) {
                for try await _ in alice.contents(of: asset, in: zone, chunkSize: 10_000) {}
            }
            #expect(read.kind == .corruptEntry)
            let file = try await #require(throws: MirrorError.self) { try await alice.fileURL(for: asset, in: zone) }
            #expect(file.kind == .corruptEntry)
        }
    }

    /// Users uploading through one relay share its one presence session: the relay holds
    /// no connection per user that stored an asset.
    @Test func manyUsersUploadingShareTheRelaysOnePresence() async throws {
        try await RunningRelay.with { relay in
            for index in 0..<8 {
                let name = RelayTestServer.uniqueName("user")
                _ = try await relay.client(name).storeAsset(Data("photo \(index)".utf8), in: .private("Photo", user: name))
            }
            let presences = try await relay.admin(
                """
                SELECT count(*)::text FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = 'magicmirror-assets'
                """)
            #expect(presences == ["1"])
            #expect(try await Self.storedAssets(relay).count == 8)
        }
    }

    @Test func anotherUsersAssetsAreRefused() async throws {
        try await RunningRelay.with { relay in
            let (aliceName, bobName) = (RelayTestServer.uniqueName("alice"), RelayTestServer.uniqueName("bob"))
            let (alice, bob) = (relay.client(aliceName), relay.client(bobName))
            let alicesZone = ZoneID.private("Photo", user: aliceName)
            let asset = try await alice.storeAsset(Data("alice's photo".utf8), in: alicesZone)
            try await alice.commit(
                [.save("p", fields: try JSONEncoder().encode(["image": asset]), baseVersion: 0, timestamp: HLCTimestamp(millis: 1_000, counter: 0))],
                to: alicesZone)
            _ = try await bob.fetchAll(in: .private("Photo", user: bobName))

            // Reading: row-level security shows bob no asset of alice's zone.
            let read = try await #require(throws: MirrorError.self) {
                for try await _ in bob.contents(of: asset, in: alicesZone, chunkSize: 1024) {}
            }
            #expect(read.kind == .notFound)
            let file = try await #require(throws: MirrorError.self) { try await bob.fileURL(for: asset, in: alicesZone) }
            #expect(file.kind == .notFound)
            // Writing: refused before a byte is read, naming bob and alice's zone.
            let store = try await #require(throws: MirrorError.self) {
                try await bob.storeAsset(Data("planted".utf8), in: alicesZone)
            }
            #expect(store.kind == .permissionDenied)
            #expect(store.message.contains("\(bobName) may not store an asset in"), "\(store.message)")
            // Collecting alice's zone as bob removes nothing of hers.
            try await alice.commit([.delete("p", baseVersion: 1, timestamp: HLCTimestamp(millis: 2_000, counter: 0))], to: alicesZone)
            let collect = try await #require(throws: MirrorError.self) { try await bob.removeUnreferencedAssets(in: alicesZone) }
            #expect(collect.kind == .permissionDenied)
            #expect(try await Self.storedAssets(relay) == ["\(aliceName) 13"])
            var bytes = Data()
            for try await piece in alice.contents(of: asset, in: alicesZone, chunkSize: 1024) { bytes += piece }
            #expect(bytes == Data("alice's photo".utf8))
        }
    }

    @Test func anUploadOverTheRelaysLimitIs413AndStoresNothing() async throws {
        let relay = try await RunningRelay.start(extraArguments: ["--max-asset-bytes", "1048576"])
        do {
            let aliceName = RelayTestServer.uniqueName("alice")
            let alice = relay.client(aliceName)
            let zone = ZoneID.private("Photo", user: aliceName)
            // At the limit: stored.
            let atLimit = try await alice.storeAsset(Self.bytes(1_048_576), in: zone)
            #expect(atLimit.size == 1_048_576)
            // A file a byte over: refused, with the limit named.
            let over = try Self.file(Self.bytes(1_048_577))
            defer { try? FileManager.default.removeItem(at: over) }
            let error = try await #require(throws: MirrorError.self) { try await alice.storeAsset(contentsOf: over, in: zone) }
            #expect(error.message.contains("at most 1048576 bytes"), "\(error.message)")
            #expect(error.nothingStored)
            // Streamed without a declared length (chunked): refused as it passes the limit.
            let token = try await RelayTestServer.token(aliceName)
            var request = URLRequest(url: URL(string: relay.url.absoluteString + "/v1/assets/store?"
                + (try RelayWire.assetQuery(zone: zone, writerID: alice.writerID)))!)
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Self.bytes(3 * 1024 * 1024))
            request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
            let (body, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 413)
            #expect(RelayHostileInputTests.code(body) == "payloadTooLarge", "\(String(decoding: body, as: UTF8.self))")
            #expect(try await Self.storedAssets(relay) == ["\(aliceName) 1048576"])
            // Hostile uploads: no zone, a bad zone, another user's zone, no writer, another
            // user's writer, no token.
            let bobName = RelayTestServer.uniqueName("bob")
            let bobsToken = try await RelayTestServer.token(bobName)
            let bobsZone = ZoneID.private("Photo", user: bobName)
            let cases: [(String, String, String?, Int, String)] = [
                ("no zone", "writer=w", token, 400, "badRequest"),
                ("zone not JSON", "zone=%7Bnope&writer=w", token, 400, "badRequest"),
                ("bad zone name", try RelayWire.assetQuery(zone: .public("../x"), writerID: "w"), token, 400, "badRequest"),
                ("another user's zone", try RelayWire.assetQuery(zone: bobsZone, writerID: "w"), token, 403, "permissionDenied"),
                ("no writer", "zone=" + (try RelayWire.assetQuery(zone: zone, writerID: "w")).dropFirst(5).prefix { $0 != "&" }, token, 400, "badRequest"),
                ("another user's writer", try RelayWire.assetQuery(zone: bobsZone, writerID: alice.writerID), bobsToken, 403, "writerTaken"),
                ("no token", try RelayWire.assetQuery(zone: zone, writerID: "w"), nil, 401, "unauthorized"),
            ]
            for (name, query, bearer, status, code) in cases {
                let answer = try await relay.send("/v1/assets/store?" + query, body: Data("bytes".utf8), token: bearer)
                #expect(answer.status == status, "\(name)")
                #expect(RelayHostileInputTests.code(answer.body) == code, "\(name): \(String(decoding: answer.body, as: UTF8.self))")
            }
            let badDownload = try await relay.send("/v1/assets/contents", body: Data("{\"zone\":1}".utf8), token: token)
            #expect(badDownload.status == 400)
            // The stored asset's digest with another size: no such asset.
            for size in [1, 2 * 1_048_576] {
                let request = "{\"zone\":" + String(decoding: try JSONEncoder().encode(zone), as: UTF8.self)
                    + ",\"asset\":{\"$asset\":\"\(atLimit.digest)\",\"size\":\(size)}}"
                let wrongSize = try await relay.send("/v1/assets/contents", body: Data(request.utf8), token: token)
                #expect(wrongSize.status == 404, "\(size): \(String(decoding: wrongSize.body, as: UTF8.self))")
                #expect(RelayHostileInputTests.code(wrongSize.body) == "notFound", "\(size)")
            }
            #expect(try await Self.storedAssets(relay) == ["\(aliceName) 1048576"])
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }
}
