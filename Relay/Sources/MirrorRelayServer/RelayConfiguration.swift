import Foundation

/// How `mirror-relay` runs: from its flags, then its environment.
public struct RelayConfiguration: Sendable {
    /// A configuration that cannot be used; the message says what to fix.
    public struct Problem: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The relay's own connection URL (its role, never a superuser): `MIRROR_RELAY_DATABASE_URL`.
    public var databaseURL: String
    /// Where to listen, `HOST:PORT` (port 0: any free port): `MIRROR_RELAY_LISTEN`.
    public var host = "127.0.0.1"
    public var port = 8080
    /// The HS256 secret tokens may be signed with: `MIRROR_RELAY_HS256_SECRET`.
    public var hs256Secret: String?
    /// ES256 public keys (PEM) by key id: `--es256-public-key KID=FILE`.
    public var es256PublicKeys: [(String, String)] = []
    /// The audience every token must name: `MIRROR_RELAY_AUDIENCE`.
    public var audience: String
    /// How many pooled connections the relay opens to the server.
    public var connections = 8
    /// The longest a token may still be valid, in seconds (its `exp` ahead of now).
    public var maximumTokenLifetime = 24 * 3600
    /// The largest asset a client may upload, in bytes (256 MiB unless `--max-asset-bytes`).
    public var maximumAssetBytes = 256 * 1024 * 1024
    /// The most bytes of request bodies held in memory at once, half of it one user's (256
    /// MiB unless `--max-inflight-bytes`): past it, a request is answered 503 and sent again.
    public var maximumInflightBytes = 256 * 1024 * 1024

    /// The text of `mirror-relay --help`.
    public static let help = """
        mirror-relay: many users' apps on one PostgreSQL, over HTTP (/v1/…).

        USAGE: mirror-relay [options]
               mirror-relay setup --admin-url URL --relay-role ROLE
               mirror-relay token --subject USER [--lifetime SECONDS]

        OPTIONS (each also read from the environment variable named):
          --database-url URL       the relay's own role, never a superuser      MIRROR_RELAY_DATABASE_URL
          --listen HOST:PORT       where to listen (port 0: any free port)       MIRROR_RELAY_LISTEN
          --hs256-secret SECRET    the secret of HS256 tokens                    MIRROR_RELAY_HS256_SECRET
          --es256-public-key KID=FILE  an ES256 public key (PEM), by key id; repeatable
          --audience AUDIENCE      the audience every token must name            MIRROR_RELAY_AUDIENCE
          --connections N          pooled connections to the server (default 8)
          --max-token-lifetime S   refuse tokens valid for more than S seconds (default 86400)
          --max-asset-bytes N      refuse asset uploads over N bytes (default 268435456, 256 MiB)
          --max-inflight-bytes N   hold at most N bytes of request bodies at once, and N/2 of one
                                   user's, answering 503 past it (default 268435456, 256 MiB,
                                   at least 1048576); a commit is at most N/2 and 96 MiB
          --help                   this text

        setup, run once by an administrator (a superuser or a role with CREATEROLE):
          installs the magicmirror schema, the relay's own schema (magicmirror_relay), and the
          relay role ROLE (LOGIN, NOINHERIT, no superuser, no BYPASSRLS), which may then only
          act for the user roles the relay provisions itself.

        token prints an HS256 token for USER, signed with the secret above (for development
          and scripts; see mirror-relay token --help).

        GET /health answers 200 while the relay runs (it does not ask the database).
        """

    /// Reads the flags, then the environment for what they do not give.
    ///
    /// - Throws: ``Problem`` naming the flag or variable that is missing or malformed.
    public init(arguments: [String], environment: [String: String]) throws {
        var flags: [String: String] = [:]
        var keys: [String] = []
        var index = 0
        while index < arguments.count {
            let flag = arguments[index]
            guard flag.hasPrefix("--"), index + 1 < arguments.count else {
                throw Problem("unexpected argument \(flag) (see mirror-relay --help)")
            }
            if flag == "--es256-public-key" { keys.append(arguments[index + 1]) } else { flags[flag] = arguments[index + 1] }
            index += 2
        }
        let known: Set = ["--database-url", "--listen", "--hs256-secret", "--audience", "--connections", "--max-token-lifetime", "--max-asset-bytes",
            "--max-inflight-bytes"]
        if let unknown = flags.keys.first(where: { !known.contains($0) }) {
            throw Problem("unknown option \(unknown) (see mirror-relay --help)")
        }
        func value(_ flag: String, _ variable: String) -> String? {
            flags[flag] ?? environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        }
        guard let url = value("--database-url", "MIRROR_RELAY_DATABASE_URL") else {
            throw Problem("no database: give --database-url or MIRROR_RELAY_DATABASE_URL")
        }
        guard let audience = value("--audience", "MIRROR_RELAY_AUDIENCE") else {
            throw Problem("no audience: give --audience or MIRROR_RELAY_AUDIENCE")
        }
        databaseURL = url
        self.audience = audience
        hs256Secret = value("--hs256-secret", "MIRROR_RELAY_HS256_SECRET")
        for key in keys {
            guard let equals = key.firstIndex(of: "=") else { throw Problem("--es256-public-key takes KID=FILE, not \(key)") }
            let path = String(key[key.index(after: equals)...])
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw Problem("cannot read the ES256 public key \(path)")
            }
            es256PublicKeys.append((String(key[..<equals]), pem))
        }
        guard hs256Secret != nil || !es256PublicKeys.isEmpty else {
            throw Problem("no token key: give --hs256-secret (MIRROR_RELAY_HS256_SECRET) or --es256-public-key")
        }
        if let listen = value("--listen", "MIRROR_RELAY_LISTEN") {
            guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
                (0...65535).contains(port)
            else { throw Problem("--listen takes HOST:PORT, not \(listen)") }
            host = String(listen[..<colon])
            self.port = port
        }
        if let text = flags["--connections"] {
            guard let count = Int(text), (1...1000).contains(count) else { throw Problem("--connections takes 1…1000") }
            connections = count
        }
        if let text = flags["--max-token-lifetime"] {
            guard let seconds = Int(text), seconds > 0 else { throw Problem("--max-token-lifetime takes a number of seconds") }
            maximumTokenLifetime = seconds
        }
        if let text = flags["--max-asset-bytes"] {
            guard let bytes = Int(text), bytes > 0 else { throw Problem("--max-asset-bytes takes a number of bytes") }
            maximumAssetBytes = bytes
        }
        if let text = flags["--max-inflight-bytes"] {
            guard let bytes = Int(text), bytes >= 1024 * 1024 else {
                throw Problem("--max-inflight-bytes takes a number of bytes, at least 1048576")
            }
            maximumInflightBytes = bytes
        }
    }
}
