import Foundation
import HTTPTypes
import JWTKit
import MagicMirror
import Synchronization

/// Checks a request's bearer token: its signature (HS256 with the relay's secret, or ES256
/// with one of its public keys, chosen by the token's `kid`), its expiry and its audience.
/// The user the relay acts for is the token's subject, nothing the request says.
struct RelayTokens: Sendable {
    /// The longest token accepted, in bytes.
    static let maximumLength = 8 * 1024
    /// The longest subject accepted, in bytes: PostgreSQL's role names end at 63.
    static let maximumSubjectLength = 63

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        var nbf: NotBeforeClaim?

        // Expiry and audience are checked by RelayTokens, which tells them apart.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    let keys: JWTKeyCollection
    let audience: String
    /// The key ids configured (ES256 keys): a token naming another is refused, never
    /// checked with the HS256 secret.
    var kids: Set<String> = []
    var maximumLifetime: TimeInterval = 24 * 3600
    /// How far a `nbf` may be ahead of the relay's clock.
    static let leeway: TimeInterval = 60
    /// The tokens this relay accepted, by their text.
    let accepted = AcceptedTokens()

    /// The keys of a configuration.
    ///
    /// - Throws: ``RelayConfiguration/Problem`` for a key that cannot be read.
    static func make(_ configuration: RelayConfiguration) async throws -> RelayTokens {
        let keys = JWTKeyCollection()
        if let secret = configuration.hs256Secret {
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        }
        for (kid, pem) in configuration.es256PublicKeys {
            do {
                await keys.add(ecdsa: try ES256PublicKey(pem: pem), kid: JWKIdentifier(string: kid))
            } catch {
                throw RelayConfiguration.Problem("the ES256 public key \(kid) is not a PEM public key: \(error)")
            }
        }
        return RelayTokens(
            keys: keys, audience: configuration.audience, kids: Set(configuration.es256PublicKeys.map(\.0)),
            maximumLifetime: TimeInterval(configuration.maximumTokenLifetime))
    }

    /// The subject of the `Authorization: Bearer` header's token.
    ///
    /// - Throws: A ``RelayFailure``: `unauthorized` for a missing, oversized, badly signed or
    ///   foreign token; `tokenExpired` for an expired one (the client asks for a new one).
    func subject(authorization: String?) async throws -> String {
        try await verified(authorization: authorization).subject
    }

    /// The subject of the request's token, and when the token expires (a stream ends then).
    ///
    /// - Throws: As ``subject(authorization:)``.
    func verified(authorization: String?) async throws -> (subject: String, expires: Date) {
        guard let authorization, authorization.hasPrefix("Bearer ") else {
            throw RelayFailure.unauthorized("the request carries no token (Authorization: Bearer …)")
        }
        let token = authorization.dropFirst("Bearer ".count)
        guard token.utf8.count <= Self.maximumLength else {
            throw RelayFailure.unauthorized("the token is longer than \(Self.maximumLength) bytes")
        }
        // A JWT is printable ASCII (base64url and dots). Anything else is refused before the
        // tokens accepted are looked up: Swift's strings compare by canonical equivalence,
        // so a copy with U+212A KELVIN SIGN for each "K" was found as the token itself.
        guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw RelayFailure.unauthorized("the token is not a JWT: it has characters other than printable ASCII")
        }
        let text = String(token)
        if let known = accepted.lookup(text), known.expires > Date() {
            return known
        }
        let header = token.split(separator: ".", omittingEmptySubsequences: false).first.flatMap { Self.header(String($0)) }
        if let kid = header?["kid"] {
            guard let kid = kid as? String, kids.contains(kid) else {
                throw RelayFailure.unauthorized("the token's key id (kid) names no key of this relay")
            }
        }
        guard header?["crit"] == nil else {
            throw RelayFailure.unauthorized("the token has critical header parameters (crit), which the relay does not know")
        }
        let claims: Claims
        do {
            claims = try await keys.verify(text, as: Claims.self)
        } catch {
            throw RelayFailure.unauthorized("the token is not signed by a key of this relay, or is not a JWT")
        }
        guard claims.exp.value > Date() else {
            throw RelayFailure(.unauthorized, "tokenExpired", "the token expired at \(claims.exp.value)")
        }
        guard claims.exp.value.timeIntervalSinceNow <= maximumLifetime else {
            throw RelayFailure.unauthorized("the token is valid for more than \(Int(maximumLifetime)) seconds")
        }
        if let nbf = claims.nbf, nbf.value.timeIntervalSinceNow > Self.leeway {
            throw RelayFailure.unauthorized("the token is not valid before \(nbf.value)")
        }
        guard claims.aud.value.contains(audience) else {
            throw RelayFailure.unauthorized("the token is not for this relay (its audience is not \(audience))")
        }
        let subject = claims.sub.value
        if let problem = Self.problem(withSubject: subject) {
            throw RelayFailure.unauthorized("the token's subject \(problem)")
        }
        accepted.insert(text, subject: subject, expires: claims.exp.value)
        return (subject, claims.exp.value)
    }

    /// Why `subject` cannot be a user the relay acts for (a PostgreSQL role of that name),
    /// or `nil` when it can.
    static func problem(withSubject subject: String) -> String? {
        guard subject.utf8.count <= maximumSubjectLength else {
            return "is longer than \(maximumSubjectLength) bytes"
        }
        do {
            _ = try MirrorUser(name: subject)
        } catch {
            return "cannot be a user name: \(error.message)"
        }
        guard !subject.hasPrefix("pg_"), subject.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
            return "cannot be a user name"
        }
        return nil
    }

    /// A token's header (its first part, base64url JSON), or `nil` when it is none.
    static func header(_ part: String) -> [String: Any]? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

/// The tokens a relay accepted, by their text (printable ASCII, so equal strings are equal
/// bytes): a client sends the same token with every request until it expires, and checking
/// its signature and decoding its JSON took about 8 % of the relay's processor per commit. Only a token that passed every check is kept, and it
/// is taken from here only until its expiry (the checks that depend on the time: a `nbf`
/// passed stays passed, and a lifetime within the limit only shrinks). The relay's keys do
/// not change while it runs. At most `capacity` tokens: past it, the expired ones go, then
/// all of them.
final class AcceptedTokens: Sendable {
    let capacity: Int
    private let tokens = Mutex<[String: (subject: String, expires: Date)]>([:])

    init(capacity: Int = 16_384) {
        self.capacity = capacity
    }

    /// The subject and expiry of `token`, when this relay accepted it.
    func lookup(_ token: String) -> (subject: String, expires: Date)? {
        tokens.withLock { $0[token] }
    }

    func insert(_ token: String, subject: String, expires: Date) {
        tokens.withLock { tokens in
            if tokens.count >= capacity, tokens[token] == nil {
                let now = Date()
                tokens = tokens.filter { $0.value.expires > now }
                if tokens.count >= capacity { tokens.removeAll(keepingCapacity: true) }
            }
            tokens[token] = (subject, expires)
        }
    }

    /// How many tokens are kept.
    var count: Int { tokens.withLock { $0.count } }
}
