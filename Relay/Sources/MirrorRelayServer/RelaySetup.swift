import Foundation
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
import PostgresNIO

/// What `mirror-relay setup` installs, as an administrator, beside the `magicmirror` schema
/// (which it installs or migrates by opening a `PostgreSQLDatabase`):
///
/// - the role the relay connects as, created and marked (its comment) by setup; an existing
///   role without the mark is refused, never adopted: `LOGIN NOINHERIT`, never superuser, no `BYPASSRLS`, no
///   `CREATEROLE`: it reads and writes only as the users it acts for (`SET LOCAL ROLE`);
/// - the schema `magicmirror_relay`, closed to `PUBLIC`:
///   - `users`: the subjects whose roles the relay provisioned; the relay acts for these
///     only;
///   - `writers`: each writer id and the subject that first committed under it; a writer id
///     is another user's to nobody else;
///   - `commits`: the idempotency keys of applied commits with the digest of their bodies,
///     written in each commit's own transaction, readable and writable by the relay role
///     only;
///   - `commit(subject, key, digest, …)`: a commit in one statement (see ``commitFunction``),
///     executable by the relay role only;
///   - `provision(subject)`, `SECURITY DEFINER` (the administrator's rights), executable by
///     the relay role only, one call per subject at a time across relays (the subject's
///     row is written first, and a second call waits on its key): creates the `NOLOGIN NOINHERIT` role named exactly as the
///     subject (the schema's rules read `current_user`, so a user's role is their name) and
///     makes the relay a member of it. It refuses a subject that is longer than 63 bytes,
///     begins with `pg_`, or names a role that exists and that it did not create
///     (`postgres`, the relay's own role, an administrator's).
enum RelaySetup {
    /// The longest a statement of the relay waits for a lock, and runs, in its sessions.
    static let lockTimeout = "5s"
    static let statementTimeout = "60s"

    /// The statements of the relay's schema for the relay role `role` (quoted here).
    static func statements(relayRole role: String) -> [String] {
        let quoted = "\"" + role.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        let literal = "'" + role.replacingOccurrences(of: "'", with: "''") + "'"
        let madeBySetup = "'mirror-relay: the role a relay connects as'"
        return [
            """
            DO $do$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = \(literal)) THEN
                    CREATE ROLE \(quoted) LOGIN NOINHERIT;
                    COMMENT ON ROLE \(quoted) IS \(madeBySetup);
                END IF;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- made meanwhile by a setup of another database of the cluster
            END $do$
            """,
            // A role setup did not make (an administrator's, or a subject's that another
            // relay provisioned) is never adopted: it could be a member of, or reachable from,
            // roles the relay must not reach.
            """
            DO $do$ BEGIN
                IF pg_catalog.shobj_description(
                    (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = \(literal)), 'pg_authid') IS DISTINCT FROM \(madeBySetup)
                THEN
                    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format(
                        'the role %I exists and was not made by mirror-relay setup; choose another --relay-role', \(literal));
                END IF;
            END $do$
            """,
            "ALTER ROLE \(quoted) NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOINHERIT",
            // The schema grants DELETE on some tables to PUBLIC, which allows any role to
            // `LOCK TABLE` them: no request of the relay waits on a lock, or runs, for ever.
            "ALTER ROLE \(quoted) SET lock_timeout = '\(lockTimeout)'",
            "ALTER ROLE \(quoted) SET statement_timeout = '\(statementTimeout)'",
            "CREATE SCHEMA IF NOT EXISTS magicmirror_relay",
            "REVOKE ALL ON SCHEMA magicmirror_relay FROM PUBLIC",
            """
            CREATE TABLE IF NOT EXISTS magicmirror_relay.users (
                subject text COLLATE "C" PRIMARY KEY,
                created timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE IF NOT EXISTS magicmirror_relay.commits (
                subject text COLLATE "C" NOT NULL,
                key text COLLATE "C" NOT NULL,
                created timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (subject, key))
            """,
            // The SHA-256 of the commit's body (its JSON with sorted keys): a key reused with
            // another body is refused.
            "ALTER TABLE magicmirror_relay.commits ADD COLUMN IF NOT EXISTS digest bytea",
            """
            CREATE TABLE IF NOT EXISTS magicmirror_relay.writers (
                writer text COLLATE "C" PRIMARY KEY,
                subject text COLLATE "C" NOT NULL,
                created timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE OR REPLACE FUNCTION magicmirror_relay.provision(p_subject text)
            RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                -- One provision of a subject at a time, in every relay: the subject's row
                -- first, so that a second provision waits on its key for the first to end, then
                -- finds it and returns (an advisory lock, which any role of the cluster may take,
                -- would let a stranger hold a new user out).
                INSERT INTO magicmirror_relay.users (subject) VALUES (p_subject) ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    RETURN;
                END IF;
                IF p_subject IS NULL OR octet_length(p_subject) NOT BETWEEN 1 AND 63
                   OR left(p_subject, 3) = 'pg_' THEN
                    RAISE EXCEPTION USING ERRCODE = '42501',
                        MESSAGE = 'magicmirror-relay: this subject cannot be a role name';
                END IF;
                IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_subject) THEN
                    RAISE EXCEPTION USING ERRCODE = '42501',
                        MESSAGE = format('magicmirror-relay: the role %I exists and was not made for the relay', p_subject);
                END IF;
                EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT', p_subject);
                EXECUTE format('GRANT %I TO %I', p_subject, \(literal));
            END $fn$
            """,
            commitFunction,
            "REVOKE ALL ON FUNCTION magicmirror_relay.provision(text) FROM PUBLIC",
            "GRANT USAGE ON SCHEMA magicmirror_relay TO \(quoted)",
            "GRANT SELECT ON magicmirror_relay.users TO \(quoted)",
            "GRANT SELECT, INSERT ON magicmirror_relay.commits TO \(quoted)",
            "GRANT SELECT, INSERT ON magicmirror_relay.writers TO \(quoted)",
            "GRANT EXECUTE ON FUNCTION magicmirror_relay.provision(text) TO \(quoted)",
            "REVOKE ALL ON FUNCTION \(commitSignature) FROM PUBLIC",
            "GRANT EXECUTE ON FUNCTION \(commitSignature) TO \(quoted)",
        ]
    }

    /// The SQLSTATEs `magicmirror_relay.commit` raises.
    enum CommitState {
        /// The writer id is another subject's.
        static let writerTaken = "MR001"
        /// The idempotency key was used before with another body.
        static let keyReused = "MR002"
        /// The server did not let the relay act as the subject now.
        static let roleRefused = "MR003"
    }

    /// An expression that drops the session's cached memberships of the relay role, for a
    /// `SET ROLE` to `p_subject` that the server refused: it computes the subject's
    /// memberships instead, in the slot `SET ROLE` reads (`MEMBER` up to PostgreSQL 15, `SET`
    /// from 16), so that the next `SET ROLE` reads the catalog again. A session can keep a
    /// list that misses a role granted while it computed the list: see
    /// `PostgreSQLActingUser.transaction(on:begin:logger:_:)`, which does the same for the
    /// relay's other transactions.
    static let forgetMemberships = PostgreSQLActingUser.forgetMemberships(of: "p_subject")

    /// The function's signature, as `GRANT` and `DROP` name it.
    static let commitSignature =
        "magicmirror_relay.commit(text, text, text, \(PostgreSQLActingUser.CommitFunction.commitRecords.types))"

    /// `magicmirror_relay.commit(subject, key, digest, <commit_records' ten arguments>)`: a
    /// relay's commit in one statement (`SECURITY INVOKER`, run as the relay role, in the
    /// statement's own transaction), so that the zone's commit lock is held for one
    /// statement and no round trip:
    ///
    /// 1. binds the writer id to the subject, or raises `MR001` when it is another's;
    /// 2. with a key: raises `MR002` when the key was recorded with another digest, and
    ///    marks the commit a replay when with this one (`commit_records` then recognises
    ///    each operation as a retry and stores nothing again);
    /// 3. sets the role to the subject for the rest of the transaction, once more after a
    ///    refusal with the session's cached memberships dropped (``forgetMemberships``), and
    ///    raises `MR003` when the server refuses again; then answers `commit_records`' rows,
    ///    run as the subject, so that row-level security decides as for the subject's own
    ///    statements;
    /// 4. records the key as the relay role (back to the session's role) when the commit was
    ///    applied or refused, not when it stored nothing for another reason (delete rules,
    ///    assets), so that its retry is a first commit; a key recorded meanwhile by the same
    ///    commit sent twice marks a replay, by another body raises `MR002`;
    /// 5. adds a row `replayed` for a replay.
    static let commitFunction = """
        CREATE OR REPLACE FUNCTION magicmirror_relay.commit(
            p_subject text, p_key text, p_digest text, \(PostgreSQLActingUser.CommitFunction.commitRecords.parameters))
        RETURNS TABLE (\(PostgreSQLActingUser.CommitFunction.commitRecords.columns))
        LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$
        DECLARE
            bound text;
            recorded bytea;
            replayed boolean := false;
            outcome text;
            r record;
        BEGIN
            IF p_subject IS NULL OR p_writer IS NULL OR (p_key IS NOT NULL AND p_digest IS NULL) THEN
                RAISE EXCEPTION 'magicmirror_relay.commit: a subject, a writer, and a digest with a key'
                    USING ERRCODE = '22023';
            END IF;
            -- 1. The writer id is the subject's, or becomes it.
            INSERT INTO magicmirror_relay.writers (writer, subject) VALUES (p_writer, p_subject) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                SELECT w.subject INTO bound FROM magicmirror_relay.writers w WHERE w.writer = p_writer;
                IF bound IS DISTINCT FROM p_subject THEN
                    RAISE EXCEPTION 'the writer id is another user''s' USING ERRCODE = '\(CommitState.writerTaken)';
                END IF;
            END IF;
            -- 2. A key seen before.
            IF p_key IS NOT NULL THEN
                SELECT c.digest INTO recorded FROM magicmirror_relay.commits c
                WHERE c.subject = p_subject AND c.key = p_key;
                IF FOUND THEN
                    IF recorded IS NOT NULL AND recorded <> decode(p_digest, 'hex') THEN
                        RAISE EXCEPTION 'the key was used for another commit' USING ERRCODE = '\(CommitState.keyReused)';
                    END IF;
                    replayed := true;
                END IF;
            END IF;
            -- 3. The commit, as the subject; once more after a refusal, with the session's
            -- cached memberships of the relay role dropped (see forgetMemberships).
            BEGIN
                PERFORM set_config('role', p_subject, true);
            EXCEPTION WHEN insufficient_privilege THEN
                PERFORM \(forgetMemberships);
                BEGIN
                    PERFORM set_config('role', p_subject, true);
                EXCEPTION WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'the server did not let this process act as % now (%)', p_subject, SQLERRM
                        USING ERRCODE = '\(CommitState.roleRefused)';
                END;
            END;
            FOR r IN SELECT * FROM magicmirror.commit_records(p_scope, p_owner, p_record_type, p_writer, p_ids, p_bases,
                                                             p_fields, p_deleted, p_millis, p_counters) LOOP
                IF r.o_kind = 'zone' THEN
                    outcome := r.o_status;
                END IF;
                o_kind := r.o_kind; o_status := r.o_status; o_generation := r.o_generation; o_base := r.o_base;
                o_last := r.o_last; o_seq := r.o_seq; o_n := r.o_n; o_version := r.o_version; o_fields := r.o_fields;
                o_deleted := r.o_deleted; o_millis := r.o_millis; o_counter := r.o_counter; o_writer := r.o_writer;
                o_created_millis := r.o_created_millis; o_created_counter := r.o_created_counter; o_id := r.o_id;
                o_value := r.o_value;
                RETURN NEXT;
            END LOOP;
            -- 4. The key, as the relay role.
            PERFORM set_config('role', 'none', true);
            IF p_key IS NOT NULL AND NOT replayed AND outcome IN ('applied', 'refused') THEN
                INSERT INTO magicmirror_relay.commits (subject, key, digest)
                VALUES (p_subject, p_key, decode(p_digest, 'hex')) ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    SELECT c.digest INTO recorded FROM magicmirror_relay.commits c
                    WHERE c.subject = p_subject AND c.key = p_key;
                    IF recorded IS NOT NULL AND recorded <> decode(p_digest, 'hex') THEN
                        RAISE EXCEPTION 'the key was used for another commit' USING ERRCODE = '\(CommitState.keyReused)';
                    END IF;
                    replayed := true;
                END IF;
            END IF;
            -- 5.
            IF replayed THEN
                o_kind := 'replayed'; o_status := NULL; o_generation := NULL; o_base := NULL; o_last := NULL;
                o_seq := NULL; o_n := NULL; o_version := NULL; o_fields := NULL; o_deleted := NULL; o_millis := NULL;
                o_counter := NULL; o_writer := NULL; o_created_millis := NULL; o_created_counter := NULL; o_id := NULL;
                o_value := NULL;
                RETURN NEXT;
            END IF;
        END $fn$
        """

    /// Installs everything as the administrator the URL names.
    ///
    /// - Throws: A `MirrorError` when the server refuses.
    static func run(adminURL: String, relayRole: String, environment: [String: String]) async throws {
        guard !relayRole.isEmpty, relayRole.utf8.count <= 63, !relayRole.hasPrefix("pg_") else {
            throw RelayConfiguration.Problem("--relay-role takes a role name of 1 to 63 bytes, not beginning with pg_")
        }
        let database = try await PostgreSQLDatabase(url: adminURL, environment: environment)
        await database.close()
        do {
            try await install(adminURL: adminURL, relayRole: relayRole, environment: environment)
        } catch let error as PSQLError {
            let state = error.serverInfo?[.sqlState] ?? "no state"
            throw RelayConfiguration.Problem(
                "the server refused the setup (\(state)): \(error.serverInfo?[.message] ?? "the connection failed")")
        }
    }

    private static func install(adminURL: String, relayRole: String, environment: [String: String]) async throws {
        try await withAdminConnection(adminURL, environment: environment) { connection, logger in
            for statement in statements(relayRole: relayRole) {
                for try await _ in try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) {}
            }
        }
    }

    /// Runs `body` on one connection as the URL's role.
    static func withAdminConnection(
        _ url: String, environment: [String: String],
        _ body: @Sendable (PostgresConnection, Logger) async throws -> Void
    ) async throws {
        let configuration = try PostgresClient.Configuration(magicMirrorURL: url, environment: environment)
        let logger = Logger(label: "mirror-relay.setup", factory: { _ in SwiftLogNoOpLogHandler() })
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.withConnection { connection in
                try await body(connection, logger)
            }
        }
    }
}
