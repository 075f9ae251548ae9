import Logging
import PostgresNIO

extension PostgresConnection {
    /// Runs `body` in a transaction that `begin` starts (`BEGIN` with its options): `COMMIT`
    /// when it returns, `ROLLBACK` when it throws.
    func transaction<Value>(
        _ begin: PostgresQuery = "BEGIN", logger: Logger, _ body: () async throws -> Value
    ) async throws -> Value {
        try await query(begin, logger: logger)
        let value: Value
        do {
            value = try await body()
        } catch {
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
        try await query("COMMIT", logger: logger)
        return value
    }

    /// Runs `body` in a transaction: a new one, or, for a relay's request, the one that
    /// ``PostgreSQLActingUser`` already began as its user (a `BEGIN` inside it would commit
    /// it, and the rest would run as the relay's own role).
    func transactionUnlessActing<Value>(logger: Logger, _ body: () async throws -> Value) async throws -> Value {
        if PostgreSQLActingUser.current != nil { return try await body() }
        return try await transaction(logger: logger, body)
    }
}

extension ServerLink {
    /// Runs `body` on a connection in a `REPEATABLE READ` transaction, so that every
    /// statement sees one snapshot; for a relay's request, as its user.
    func withSnapshot<Result: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        if let acting = PostgreSQLActingUser.current {
            let wrapped = acting.wrap(body, logger: logger, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ")
            return try await PostgreSQLActingUser.$current.withValue(nil) { try await withConnection(wrapped) }
        }
        return try await withConnection { connection in
            try await connection.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger) {
                try await body(connection)
            }
        }
    }
}
