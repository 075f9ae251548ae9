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
                // Fields that refer to an asset but are not JSON (or not UTF-8): the server
                // parses those to find the assets.
                case "22P02", "22021": .invalidRecord
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
}
