import Foundation
import JWTKit
import MagicMirror
import Testing

/// Hostile tokens, paths and bodies: each gets a 4xx with the protocol's JSON error, and
/// nothing is stored.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayHostileInputTests {
    static let commitBody = Data(
        """
        {"zone":{"scope":"public","recordType":"Todo"},"writerID":"w","operations":[
        {"id":"a","baseVersion":0,"fields":"\(Data("{\"v\":1}".utf8).base64EncodedString())","timestamp":"5-0"}]}
        """.utf8)

    /// The error code of a JSON error body, or `nil` when the body is not one.
    static func code(_ body: Data) -> String? {
        let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        let error = object?["error"] as? [String: Any]
        guard error?["message"] is String else { return nil }
        return error?["code"] as? String
    }

    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Each hostile token, by name.
    static func hostileTokens() async throws -> [(String, String?, String)] {
        let expired = try await RelayTestServer.token("mallory", expiresIn: -60)
        let wrongKey = try await RelayTestServer.token("mallory", secret: "another secret, long enough for HS256")
        let wrongAudience = try await RelayTestServer.token("mallory", audience: "another-relay")
        let payload = "{\"sub\":\"mallory\",\"exp\":\(Int(Date().timeIntervalSince1970) + 3600),\"aud\":[\"\(RelayTestServer.audience)\"]}"
        let unsigned = base64URL("{\"alg\":\"none\",\"typ\":\"JWT\"}") + "." + base64URL(payload) + "."
        let oversized = try await RelayTestServer.token(String(repeating: "m", count: 10_000))
        let longSubject = try await RelayTestServer.token(String(repeating: "m", count: 64))
        return [
            ("none", nil, "unauthorized"), ("expired", expired, "tokenExpired"), ("wrong key", wrongKey, "unauthorized"),
            ("alg none", unsigned, "unauthorized"), ("wrong audience", wrongAudience, "unauthorized"),
            ("oversized", oversized, "unauthorized"), ("subject too long", longSubject, "unauthorized"),
            ("not a JWT", "not.a.jwt", "unauthorized"),
        ]
    }

    @Test func hostileTokensGetAJSONErrorAndStoreNothing() async throws {
        try await RunningRelay.with { relay in
            for (name, token, code) in try await Self.hostileTokens() {
                let answer = try await relay.send("/v1/commit", body: Self.commitBody, token: token)
                #expect(answer.status == 401, "\(name)")
                #expect(Self.code(answer.body) == code, "\(name): \(String(decoding: answer.body, as: UTF8.self))")
            }
            let stored = try await RelayTestServer.admin("SELECT count(*)::text FROM magicmirror.records", database: relay.database)
            #expect(stored == ["0"])
            let users = try await RelayTestServer.admin("SELECT count(*)::text FROM magicmirror_relay.users", database: relay.database)
            #expect(users == ["0"])
        }
    }

    @Test func hostilePathsAndBodiesGetAJSONErrorAndStoreNothing() async throws {
        try await RunningRelay.with { relay in
            let token = try await RelayTestServer.token(RelayTestServer.uniqueName("user"))
            let cases: [(String, String, Data, Int, String)] = [
                ("unknown path", "/v1/nothing", Self.commitBody, 404, "notFound"),
                ("dot segments", "/v1/../v1/commit/..%2f..%2fetc", Self.commitBody, 404, "notFound"),
                ("NUL in the path", "/v1/commit%00", Self.commitBody, 404, "notFound"),
                ("not JSON", "/v1/commit", Data("{not json".utf8), 400, "badRequest"),
                ("wrong shape", "/v1/commit", Data("{\"zone\":42}".utf8), 400, "badRequest"),
                ("bad zone name", "/v1/commit", Data(
                    String(decoding: Self.commitBody, as: UTF8.self).replacingOccurrences(of: "\"Todo\"", with: "\"../x\"").utf8),
                    400, "badRequest"),
                ("bad record id", "/v1/commit", Data(
                    String(decoding: Self.commitBody, as: UTF8.self).replacingOccurrences(of: "\"id\":\"a\"", with: "\"id\":\"a/b\"").utf8),
                    400, "invalidName"),
                ("fields not an object", "/v1/commit", Data(
                    String(decoding: Self.commitBody, as: UTF8.self).replacingOccurrences(
                        of: Data("{\"v\":1}".utf8).base64EncodedString(), with: Data("[1]".utf8).base64EncodedString()).utf8),
                    400, "invalidRecord"),
                ("oversized body", "/v1/token", Data(repeating: 0x20, count: 2 * 1024 * 1024), 413, "payloadTooLarge"),
                ("changes without a token", "/v1/changes", Data("{\"zone\":{\"scope\":\"public\",\"recordType\":\"Todo\"}}".utf8), 400, "badRequest"),
                ("bad page limit", "/v1/records", Data("{\"zone\":{\"scope\":\"public\",\"recordType\":\"Todo\"},\"limit\":0}".utf8), 400, "badRequest"),
            ]
            for (name, path, body, status, code) in cases {
                let answer = try await relay.send(path, body: body, token: token)
                #expect(answer.status == status, "\(name)")
                #expect(Self.code(answer.body) == code, "\(name): \(String(decoding: answer.body, as: UTF8.self))")
            }
            let badKey = try await relay.send("/v1/commit", body: Self.commitBody, token: token, headers: ["Idempotency-Key": "no spaces"])
            #expect(badKey.status == 400)
            #expect(Self.code(badKey.body) == "badRequest")
            let stored = try await RelayTestServer.admin("SELECT count(*)::text FROM magicmirror.records", database: relay.database)
            #expect(stored == ["0"])
            let health = try await relay.send("/health", method: "GET", token: nil)
            #expect(health.status == 200)
        }
    }

    /// A body framed in a way the relay's parser refuses (an unknown transfer coding, a chunk
    /// size past any number) is a 400, not the relay's own failure.
    @Test func aBodyTheParserRefusesIsABadRequest() async throws {
        try await RunningRelay.with { relay in
            let token = try await RelayTestServer.token(RelayTestServer.uniqueName("user"))
            let body = "{\"zone\":{\"scope\":\"public\",\"recordType\":\"Todo\"}}"
            let head = "POST /v1/token HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\n"
            let framings = [
                ("unknown transfer coding", "Transfer-Encoding: xchunked\r\n\r\n\(String(body.utf8.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n"),
                ("chunk size past any number", "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n\(body)\r\n0\r\n\r\n"),
            ]
            let port = relay.url.port ?? 0
            for (name, rest) in framings {
                let answer = await Task.detached { () -> String in
                    guard let connection = RawConnection(port: port), connection.write(head + rest) else { return "" }
                    return connection.response(waitingUpTo: 60)
                }.value
                #expect(answer.hasPrefix("HTTP/1.1 400"), "\(name): \(answer)")
            }
            #expect(try await relay.send("/health", method: "GET", token: nil).status == 200)
        }
    }
}
