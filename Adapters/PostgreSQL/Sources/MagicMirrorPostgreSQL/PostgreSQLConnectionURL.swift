import Foundation
import MagicMirror
import PostgresNIO

/// Parses `postgres://ROLE@HOST:PORT/DATABASE?sslmode=MODE&host=SOCKETDIR` into a
/// postgres-nio configuration; see ``PostgreSQLDatabase/init(url:environment:)``.
enum PostgreSQLConnectionURL {
    static func configuration(
        from text: String, environment: [String: String]
    ) throws(MirrorError) -> PostgresClient.Configuration {
        guard let components = URLComponents(string: text),
              components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            throw MirrorError(.unsupportedFormat, "not a postgres:// URL: \(redacted(text))")
        }
        guard components.password == nil else {
            throw MirrorError(
                .unsupportedFormat,
                "the URL carries a password; pass it in the PGPASSWORD environment variable instead")
        }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let username = components.user.flatMap { $0.removingPercentEncoding }
            ?? environment["PGUSER"] ?? ProcessInfo.processInfo.userName
        let password = environment["PGPASSWORD"]
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = path.isEmpty ? nil : path.removingPercentEncoding
        let port = components.port ?? 5432
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            return PostgresClient.Configuration(
                unixSocketPath: socketDirectory + "/.s.PGSQL.\(port)", username: username,
                password: password, database: database)
        }
        guard let host = components.host, !host.isEmpty else {
            throw MirrorError(.unsupportedFormat, "the URL names no host: \(redacted(text))")
        }
        let tls: PostgresClient.Configuration.TLS
        switch query["sslmode"] ?? "prefer" {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer(.makeClientConfiguration())
        case "require", "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
        case let mode:
            throw MirrorError(.unsupportedFormat, "unknown sslmode \(mode): use disable, prefer or require")
        }
        return PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
    }

    /// The URL without anything after `://` up to `@`, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.firstIndex(of: "@"), let scheme = text.range(of: "://") else { return text }
        return String(text[..<scheme.upperBound]) + "…" + String(text[at...])
    }
}
