import Foundation
import JWTKit
@_spi(RelayProtocol) import MagicMirrorRelay
@testable import MirrorRelayServer
import Testing

/// The tokens a relay accepted are kept by their text, so that a client's next request is
/// not checked again (``AcceptedTokens``); a kept token is still refused once it expires,
/// and a token never accepted is never taken from there.
@Suite(.timeLimit(.minutes(5)))
struct RelayTokenCacheTests {
    static func tokens() async -> RelayTokens {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: RelayTestServer.secret), digestAlgorithm: .sha256)
        return RelayTokens(keys: keys, audience: RelayTestServer.audience)
    }

    @Test func anAcceptedTokenIsRefusedOnceItExpires() async throws {
        let tokens = await Self.tokens()
        let token = try await RelayTestServer.token("someone", expiresIn: 2)
        let first = try await tokens.verified(authorization: "Bearer " + token)
        #expect(first.subject == "someone")
        #expect(tokens.accepted.count == 1)
        #expect(try await tokens.verified(authorization: "Bearer " + token).subject == "someone")
        // The token's own expiry (whole seconds), then a second more.
        while Date() <= first.expires.addingTimeInterval(1) { try await Task.sleep(for: .milliseconds(100)) }
        let refused = await #expect(throws: RelayFailure.self) {
            _ = try await tokens.verified(authorization: "Bearer " + token)
        }
        #expect(refused?.detail.code == "tokenExpired", "\(String(describing: refused))")
    }

    @Test func aTokenThatFailsACheckIsNeverKept() async throws {
        let tokens = await Self.tokens()
        let foreign = try await RelayTestServer.token("someone", audience: "another relay")
        let badlySigned = try await RelayTestServer.token("someone", secret: "another secret, as long as a key for HS256 must be")
        for token in [foreign, badlySigned] {
            for _ in 0..<2 {
                await #expect(throws: RelayFailure.self) { _ = try await tokens.verified(authorization: "Bearer " + token) }
            }
        }
        #expect(tokens.accepted.count == 0)
    }

    /// A token is kept by its bytes: a copy of a kept token with U+212A KELVIN SIGN for each
    /// "K" (a string Swift takes for equal) was served from the kept tokens (found by an
    /// attack pass, 2026-11-28); it is refused.
    @Test func aTokenIsKeptByItsBytes() async throws {
        let tokens = await Self.tokens()
        var token = ""
        for index in 0..<200 where !token.contains("K") {
            token = try await RelayTestServer.token("someone\(index)")
        }
        try #require(token.contains("K"), "a token with a K to spell otherwise")
        let subject = try await tokens.verified(authorization: "Bearer " + token).subject
        let copy = token.replacingOccurrences(of: "K", with: "\u{212A}")
        #expect(copy == token, "Swift takes the copy for the token")
        await #expect(throws: RelayFailure.self) { _ = try await tokens.verified(authorization: "Bearer " + copy) }
        #expect(try await tokens.verified(authorization: "Bearer " + token).subject == subject)
    }

    /// Past its capacity the expired tokens go first, then every token.
    @Test func theKeptTokensAreBounded() {
        let kept = AcceptedTokens(capacity: 3)
        let later = Date().addingTimeInterval(3600)
        kept.insert("a", subject: "a", expires: Date().addingTimeInterval(-1))
        kept.insert("b", subject: "b", expires: later)
        kept.insert("c", subject: "c", expires: later)
        kept.insert("d", subject: "d", expires: later)
        #expect(kept.count == 3)
        #expect(kept.lookup("a") == nil)
        #expect(kept.lookup("d")?.subject == "d")
        kept.insert("e", subject: "e", expires: later)
        #expect(kept.count == 1)
        #expect(kept.lookup("e")?.subject == "e")
    }
}
