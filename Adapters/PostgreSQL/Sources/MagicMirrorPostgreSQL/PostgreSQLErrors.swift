import Foundation
import MagicMirror
import PostgresNIO

/// Turns what postgres-nio throws into ``MirrorError``s: transient kinds for what a retry
/// can cure (a lost connection, a server shutting down, a serialization failure), and
/// ``MirrorError/Kind/permissionDenied`` for what row-level security or a missing grant
/// refuses. Messages carry the server's SQLSTATE and message, never the configuration (so
/// never a password).
enum PostgreSQLErrors {
    static func mirrorError(_ error: any Error, _ doing: String, zone: ZoneID? = nil) -> MirrorError {
        if let error = error as? MirrorError { return error }
        let transaction = error as? PostgresTransactionError
        let cause: any Error =
            transaction?.closureError ?? transaction?.beginError ?? transaction?.commitError ?? error
        if let error = cause as? MirrorError { return error }
        var kind = MirrorError.Kind.unavailable
        var detail = "the connection to the server failed"
        if let psql = cause as? PSQLError {
            if let state = psql.serverInfo?[.sqlState] {
                let message = psql.serverInfo?[.message] ?? ""
                detail = "the server answered \(state): \(message)"
                kind = switch state {
                case "42501": .permissionDenied // insufficient privilege, row-level security
                case "42704": .notFound // undefined object: a share's recipient that is no role
                case "25006": .readOnly // read-only transaction (a standby)
                case "53100": .diskFull
                // Fields that refer to an asset but are not JSON (or not UTF-8, or hold a
                // `\u0000` that jsonb refuses): the server parses those to find the assets.
                case "22P02", "22021", "22P05": .invalidRecord
                case let state where state.hasPrefix("08") || state.hasPrefix("40") || state.hasPrefix("53")
                    || state.hasPrefix("57"): .unavailable // connection, rollback, resources, shutdown
                default: .ioFailure
                }
            } else {
                detail = "the connection to the server failed (\(psql.code))"
            }
        }
        var mirrorError = MirrorError(kind, "\(doing): \(detail)", recordType: zone?.recordType, scope: zone?.scope)
        mirrorError.underlying = cause
        return mirrorError
    }

    /// What opening a database throws: ``mirrorError(_:_:zone:)``, and for a role that may
    /// not create or use the `magicmirror` schema, what to do about it.
    static func openingError(_ error: any Error, role: String, database: String?) -> MirrorError {
        var opening = mirrorError(error, "opening the database")
        guard opening.kind == .permissionDenied, opening.message.contains("42501") else { return opening }
        let database = database ?? role
        let fix: String
        if opening.message.contains("permission denied for database") {
            fix = "the magicmirror schema does not exist yet, and role \(role) may not create it. Open the "
                + "database once as the role that should own the schema (for example the database's owner), "
                + "which creates it; every other role can then connect. Or let \(role) own it: "
                + "GRANT CREATE ON DATABASE \(database) TO \(role)"
        } else {
            fix = "role \(role) may not use the magicmirror schema; the schema's owner grants what roles need "
                + "when it creates or migrates the schema: open the database once as that owner"
        }
        opening = MirrorError(.permissionDenied, "\(opening.message). \(fix) (see \"Running on PostgreSQL\")")
        opening.underlying = error
        return opening
    }

    /// Why a new connection to `link`'s server failed, in words that name the cause and
    /// what to do: the server's own words when it answered (too many connections, an
    /// unknown role or database, a password refused), the socket's error when nothing
    /// answered (connection refused, no route, a timeout).
    ///
    /// Too many connections and a refused or silent port are transient
    /// (``MirrorError/Kind/unavailable``: the mirror retries with backoff); an unknown
    /// role, a refused password or a missing database are not.
    /// Whether `refusal` (from ``connectionRefusal(_:to:)``) says the server has too many
    /// connections (SQLSTATE 53300).
    static func isTooManyConnections(_ refusal: MirrorError) -> Bool {
        (refusal.underlying as? PSQLError)?.serverInfo?[.sqlState] == "53300"
    }

    static func connectionRefusal(_ error: any Error, to link: ServerLink) -> MirrorError {
        if let error = error as? MirrorError { return error }
        let server = link.serverName
        let role = link.key.username
        let database = link.key.database ?? role
        let psql = error as? PSQLError
        if let state = psql?.serverInfo?[.sqlState] {
            let words = "\(state): \(psql?.serverInfo?[.message] ?? "")"
            let (kind, explanation): (MirrorError.Kind, String) = switch state {
            case "53300":
                (.unavailable, "the server at \(server) refused a new connection: it has too many (\(words)). "
                    + "Raise max_connections or the role's CONNECTION LIMIT, or lower the pool size of the "
                    + "processes that connect; retrying with backoff")
            case "28000" where (psql?.serverInfo?[.message] ?? "").contains("does not exist"):
                (.permissionDenied, "the server at \(server) has no role \(role) (\(words)): "
                    + "create it (CREATE ROLE \(role) LOGIN) or connect as another role")
            case "28000", "28P01":
                (.permissionDenied, "the server at \(server) refused role \(role) (\(words)): check the "
                    + "role's password (PGPASSWORD) and the server's pg_hba.conf")
            case "3D000":
                (.notFound, "the server at \(server) has no database \(database) (\(words)): "
                    + "create it (CREATE DATABASE \(database)) or name another in the URL")
            case "42501":
                (.permissionDenied, "the server at \(server) does not let role \(role) connect to database "
                    + "\(database) (\(words)): GRANT CONNECT ON DATABASE \(database) TO \(role)")
            case "57P03":
                (.unavailable, "the server at \(server) is not accepting connections yet (\(words)); retrying")
            default:
                (mirrorError(error, "connecting").kind, "the server at \(server) refused a new connection (\(words))")
            }
            var refusal = MirrorError(kind, explanation)
            refusal.underlying = error
            return refusal
        }
        let socketError = psql?.underlying ?? error
        let described = psql.map { psql in "\(psql.code)" + (psql.underlying.map { " (\($0))" } ?? "") } ?? "\(error)"
        var explanation = "could not connect to \(server): \(described)"
        switch errno(of: socketError) {
        case ECONNREFUSED:
            explanation = "connection refused by \(server): no server listens there (is it running, and is the "
                + "port right?); retrying with backoff"
        case EHOSTUNREACH, ENETUNREACH:
            explanation = "no route to \(server) (\(described)); retrying with backoff"
        case ENOENT:
            explanation = "no server socket at \(server): is the server running, and is the socket directory "
                + "right?; retrying with backoff"
        default:
            if described.lowercased().contains("timeout") || described.contains("timed out") {
                explanation = "no answer from \(server) while connecting (\(described)); retrying with backoff"
            }
        }
        var refusal = MirrorError(.unavailable, explanation)
        refusal.underlying = error
        return refusal
    }

    /// The `errno` of a socket error, where NIO keeps one.
    private static func errno(of error: any Error) -> Int32? {
        if let error = error as? IOError { return error.errnoCode }
        if let error = error as? NIOConnectionError {
            for failure in error.connectionErrors {
                if let code = errno(of: failure.error) { return code }
            }
            if let error = error.dnsAAAAError ?? error.dnsAError { return errno(of: error) }
        }
        return nil
    }
}
