import Foundation
import JWTKit

/// `mirror-relay token`: signs an HS256 token for a user with the relay's secret, for a
/// developer's machine and scripts (`mirror-todo-relay`, curl). An app's tokens come from
/// its own sign-in service, which holds the secret or an ES256 private key.
public enum RelayTokenCommand {
    /// The text of `mirror-relay token --help`.
    public static let help = """
        mirror-relay token: prints an HS256 token for a user, signed with the relay's secret.

        USAGE: mirror-relay token --subject USER [--lifetime SECONDS]

        OPTIONS (each also read from the environment variable named):
          --subject USER           the user the token names (a PostgreSQL role name)
          --lifetime SECONDS       how long the token is valid (default 3600)
          --hs256-secret SECRET    the relay's secret                           MIRROR_RELAY_HS256_SECRET
          --audience AUDIENCE      the relay's audience                         MIRROR_RELAY_AUDIENCE
        """

    /// The token the arguments ask for.
    ///
    /// - Throws: ``RelayConfiguration/Problem`` naming the flag or variable that is missing
    ///   or malformed, or the reason the subject cannot be a user.
    public static func token(arguments: [String], environment: [String: String], now: Date = Date()) async throws -> String {
        var flags: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let flag = arguments[index]
            guard flag.hasPrefix("--"), index + 1 < arguments.count else {
                throw RelayConfiguration.Problem("unexpected argument \(flag) (see mirror-relay token --help)")
            }
            guard ["--subject", "--lifetime", "--hs256-secret", "--audience"].contains(flag) else {
                throw RelayConfiguration.Problem("unknown option \(flag) (see mirror-relay token --help)")
            }
            flags[flag] = arguments[index + 1]
            index += 2
        }
        func value(_ flag: String, _ variable: String) -> String? {
            (flags[flag] ?? environment[variable]).flatMap { $0.isEmpty ? nil : $0 }
        }
        guard let subject = flags["--subject"] else { throw RelayConfiguration.Problem("no user: give --subject USER") }
        if let problem = RelayTokens.problem(withSubject: subject) {
            throw RelayConfiguration.Problem("the subject \(problem)")
        }
        guard let secret = value("--hs256-secret", "MIRROR_RELAY_HS256_SECRET") else {
            throw RelayConfiguration.Problem("no secret: give --hs256-secret or MIRROR_RELAY_HS256_SECRET")
        }
        guard let audience = value("--audience", "MIRROR_RELAY_AUDIENCE") else {
            throw RelayConfiguration.Problem("no audience: give --audience or MIRROR_RELAY_AUDIENCE")
        }
        var lifetime = 3600
        if let text = flags["--lifetime"] {
            guard let seconds = Int(text), seconds > 0 else {
                throw RelayConfiguration.Problem("--lifetime must be a number of seconds above 0, not \(text)")
            }
            lifetime = seconds
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(
            RelayTokens.Claims(
                sub: SubjectClaim(value: subject), exp: ExpirationClaim(value: now.addingTimeInterval(TimeInterval(lifetime))),
                aud: AudienceClaim(value: [audience]), nbf: nil))
    }
}
