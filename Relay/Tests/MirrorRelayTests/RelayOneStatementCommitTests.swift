import Foundation
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import MagicMirrorRelay
import MirrorTestSupport
@testable import MirrorRelayServer
import Testing

/// A relay's commit is one statement, `magicmirror_relay.commit` (see `RelaySetup`): the
/// cases where that statement stores nothing and the commit goes on another way, and the
/// function itself, attacked and missing.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayOneStatementCommitTests {
    /// A commit body of one saved record `id` with `fields`, as a client sends it.
    static func body(_ zone: String, _ id: String, fields: String, timestamp: String = "5-0") -> Data {
        Data(
            """
            {"zone":\(zone),"writerID":"w-\(id)","operations":[
            {"id":"\(id)","baseVersion":0,"fields":"\(Data(fields.utf8).base64EncodedString())","timestamp":"\(timestamp)"}]}
            """.utf8)
    }

    /// A delete that a delete rule reaches is answered `rules` by the one statement, which
    /// stores nothing, and is made as a linked commit in a transaction as the user: the
    /// rule runs, and the delete's idempotency key is recorded once.
    @Test func aDeleteThatARuleReachesIsALinkedCommit() async throws {
        try await RunningRelay.with { relay in
            let alice = RelayTestServer.uniqueName("alice")
            let zone = ZoneID.private("Todo", user: alice)
            let client = relay.client(alice)
            try await client.commit(
                [.save("p", fields: Data(#"{"title":"parent"}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0)),
                 .save("c", fields: Data(#"{"parent":{"recordType":"Todo","recordID":"p"}}"#.utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 1))],
                to: zone)
            // The rule, registered as the relay would for alice (the protocol has no request for it).
            let database = try await PostgreSQLDatabase(
                url: RelayTestServer.url(database: relay.database, role: RelayTestServer.relayRole), environment: [:])
            do {
                try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: alice)) {
                    try await database.registerDeleteRules(
                        [StoredDeleteRule(referringType: "Todo", field: "parent", cardinality: .optional, targetType: "Todo", action: .nullify)],
                        referringType: "Todo", in: zone)
                }
            } catch {
                await database.close()
                throw error
            }
            await database.close()
            let keysBefore = try await relay.admin("SELECT count(*)::text FROM magicmirror_relay.commits")

            try await client.commit([.delete("p", baseVersion: 1, timestamp: HLCTimestamp(millis: 2, counter: 0))], to: zone)

            let records = try await client.fetchAll(in: zone).records
            #expect(records.map(\.id) == ["c"])
            let child = try #require(records.first?.fields)
            let object = try JSONSerialization.jsonObject(with: child) as? [String: Any]
            #expect(object?["parent"] is NSNull || object?["parent"] == nil, "the rule nulls the child's parent: \(object ?? [:])")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror_relay.commits") == ["\(Int(keysBefore.first ?? "0")! + 1)"])
        }
    }

    /// A commit refused for an asset the zone does not hold stores nothing, its key
    /// included: once the asset is stored, the same request with the same key is a first
    /// commit (applied, not `replayed`), and a third is the replay.
    @Test func aCommitRefusedForAMissingAssetLeavesItsKeyFree() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user)
            let client = relay.client(user)
            let zone = ZoneID.private("Photo", user: user)
            let bytes = Data("a photo".utf8)
            // Stored elsewhere only: the digest, which the zone does not hold yet.
            let asset = try await client.storeAsset(bytes, in: .private("Other", user: user))
            let body = Self.body(
                #"{"scope":"private","user":"\#(user)","recordType":"Photo"}"#, "photo",
                fields: #"{"image":{"$asset":"\#(asset.digest)","size":\#(bytes.count)}}"#)
            let headers = ["Idempotency-Key": "key-photo", "Content-Type": "application/json"]

            let refused = try await relay.send("/v1/commit", body: body, token: token, headers: headers)
            #expect(refused.status == 404, "\(String(decoding: refused.body, as: UTF8.self))")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror_relay.commits WHERE key = 'key-photo'") == ["0"])

            _ = try await client.storeAsset(bytes, in: zone)
            let applied = try await relay.send("/v1/commit", body: body, token: token, headers: headers)
            let again = try await relay.send("/v1/commit", body: body, token: token, headers: headers)
            #expect(applied.status == 200, "\(String(decoding: applied.body, as: UTF8.self))")
            #expect(again.status == 200)
            #expect((try JSONSerialization.jsonObject(with: applied.body) as? [String: Any])?["replayed"] as? Bool == false)
            #expect((try JSONSerialization.jsonObject(with: again.body) as? [String: Any])?["replayed"] as? Bool == true)
            #expect(try await client.fetchAll(in: zone).records.map(\.version) == [1])
        }
    }

    /// The same commit sent twice at once with one key: both are answered with the record,
    /// one of them `replayed`, and the record is stored once.
    @Test func theSameCommitSentTwiceAtOnceIsAppliedOnce() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user)
            let body = Self.body(#"{"scope":"public","recordType":"Todo"}"#, "twice", fields: #"{"v":1}"#)
            let headers = ["Idempotency-Key": "key-twice", "Content-Type": "application/json"]
            async let first = relay.send("/v1/commit", body: body, token: token, headers: headers)
            async let second = relay.send("/v1/commit", body: body, token: token, headers: headers)
            let answers = try await [first, second]
            #expect(answers.map(\.status) == [200, 200])
            let replays = try answers.map { (try JSONSerialization.jsonObject(with: $0.body) as? [String: Any])?["replayed"] as? Bool }
            #expect(replays.sorted { ($0 == true ? 1 : 0) < ($1 == true ? 1 : 0) } == [false, true], "\(replays)")
            #expect(try await relay.admin("SELECT id || ' ' || version FROM magicmirror.records") == ["twice 1"])
        }
    }

    /// Two different commits sent at once with one key, where a delete rule makes each a
    /// linked commit (the claim is recorded in the transaction, not by the function): one is
    /// applied, the other refused as a reused key, in every round; never both applied, and
    /// never one answered `replayed` for a body that was not applied.
    @Test func aKeyReusedAtOnceByLinkedCommitsIsRefused() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let token = try await RelayTestServer.token(user)
            let client = relay.client(user)
            let zone = ZoneID.public("Todo")
            _ = try await relay.admin(
                "INSERT INTO magicmirror.delete_rules VALUES ('public', '', 'Ref', 'todo', 'optional', 'Todo', 'cascade')")
            for round in 0..<5 {
                let (first, second) = ("a\(round)", "b\(round)")
                let stamp = HLCTimestamp(millis: Int64(round + 1), counter: 0)
                try await client.commit(
                    [.save(first, fields: Data("{}".utf8), baseVersion: 0, timestamp: stamp),
                     .save(second, fields: Data("{}".utf8), baseVersion: 0, timestamp: stamp)],
                    to: zone)
                func delete(_ id: String) -> Data {
                    Data(
                        """
                        {"zone":{"scope":"public","recordType":"Todo"},"writerID":"w-\(user)","operations":[
                        {"id":"\(id)","baseVersion":1,"timestamp":"\(round + 2)-0"}]}
                        """.utf8)
                }
                let headers = ["Idempotency-Key": "key-\(round)", "Content-Type": "application/json"]
                async let one = relay.send("/v1/commit", body: delete(first), token: token, headers: headers)
                async let other = relay.send("/v1/commit", body: delete(second), token: token, headers: headers)
                let answers = try await [one, other]
                #expect(answers.map(\.status).sorted() == [200, 409], "round \(round): \(answers.map { String(decoding: $0.body, as: UTF8.self) })")
                let live = Set(try await client.fetch([first, second], in: zone).map(\.id))
                #expect(live.count == 1, "round \(round): one delete applied, not \(2 - live.count)")
            }
        }
    }

    /// Another login role of the cluster cannot call the relay's commit function (the
    /// relay's schema is closed to it), nor, given the schema, act as a user through it.
    @Test func anotherRoleCannotCommitThroughTheRelaysFunction() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            _ = try await relay.client(user).currentToken(in: .private("Todo", user: user))
            let stranger = RelayTestServer.uniqueName("stranger")
            _ = try await relay.admin("CREATE ROLE \(stranger) LOGIN")
            let call = """
                SELECT count(*) FROM magicmirror_relay.commit('\(user)', NULL, NULL, 'private', '\(user)', 'Todo', 'w',
                    ARRAY['x'], ARRAY[0]::int8[], ARRAY['\\x7b7d'::bytea], ARRAY[false], ARRAY[1]::int8[], ARRAY[0]::int8[])
                """
            let refused = try await Self.psql(relay, as: stranger, call)
            #expect(refused.contains("permission denied for schema magicmirror_relay"), "\(refused)")
            // Given the schema and the function, the role still may not become the user.
            _ = try await relay.admin("GRANT USAGE ON SCHEMA magicmirror_relay TO \(stranger)")
            _ = try await relay.admin("GRANT EXECUTE ON FUNCTION \(RelaySetup.commitSignature) TO \(stranger)")
            _ = try await relay.admin("GRANT SELECT, INSERT ON magicmirror_relay.writers, magicmirror_relay.commits TO \(stranger)")
            let becoming = try await Self.psql(relay, as: stranger, call)
            #expect(becoming.contains("did not let this process act as"), "\(becoming)")
            #expect(try await relay.admin("SELECT count(*)::text FROM magicmirror.records") == ["0"])
        }
    }

    /// A database set up by an older relay, without the commit function: the commit is a
    /// 503 naming the cause, with nothing stored, and the relay serves everything else.
    @Test func aDatabaseWithoutTheCommitFunctionIsNamedAsSuch() async throws {
        try await RunningRelay.with { relay in
            let user = RelayTestServer.uniqueName("user")
            let client = relay.client(user)
            let zone = ZoneID.private("Todo", user: user)
            _ = try await client.currentToken(in: zone)
            _ = try await relay.admin("DROP FUNCTION \(RelaySetup.commitSignature)")
            let error = try await #require(throws: MirrorError.self) {
                try await client.commit([.save("a", fields: Data("{}".utf8), baseVersion: 0, timestamp: HLCTimestamp(millis: 1, counter: 0))], to: zone)
            }
            #expect(error.kind == .unavailable, "\(error)")
            #expect(error.nothingStored)
            #expect(error.message.contains("another version of mirror-relay"), "\(error.message)")
            #expect(try await client.fetchAll(in: zone).records.isEmpty)
        }
    }

    /// What psql prints, standard error included, running `statement` as `role`.
    static func psql(_ relay: RunningRelay, as role: String, _ statement: String) async throws -> String {
        let run = try await Subprocess.run(
            URL(fileURLWithPath: "/usr/bin/psql"),
            [RelayTestServer.url(database: relay.database, role: role), "-q", "-t", "-A", "-c", statement])
        return run.standardOutput + run.standardError
    }
}
