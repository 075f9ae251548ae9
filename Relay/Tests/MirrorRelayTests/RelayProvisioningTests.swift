import Foundation
import Logging
import MagicMirror
@_spi(Relay) @testable import MagicMirrorPostgreSQL
@testable import MirrorRelayServer
import PostgresNIO
import Synchronization
import Testing

/// A pooled session of the relay whose cached memberships miss a user just provisioned (it
/// computed them while the user's `GRANT` landed: see
/// `PostgreSQLActingUser.transaction(on:begin:logger:_:)`) still acts for that user: the
/// adapter's transactions and the relay's one-statement commit drop the cached list and set
/// the role again, where the server refused `SET ROLE` to a role the relay is a member of.
/// One test at a time: a test's grants would make another's session right.
@Suite(.serialized, .timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayProvisioningTests {
    static let logger = RelayTestServer.logger

    @Test func aTransactionOnASessionThatMissedTheGrantActsForTheNewUser() async throws {
        try await StaleSession.with { session in
            let subject = try await session.makeStale()
            let run = PostgreSQLActingUser(role: subject).wrap({ connection in
                try await StaleSession.text("SELECT current_user::text", on: connection)
            }, logger: Self.logger)
            #expect(try await run(session.connection) == subject)
        }
    }

    @Test func aCommitOnASessionThatMissedTheGrantActsForTheNewUser() async throws {
        try await StaleSession.with { session in
            let subject = try await session.makeStale()
            // magicmirror_relay.commit with no operation: it sets the role, then finds (makes)
            // the subject's zone, as the subject.
            let kinds = try await StaleSession.texts(
                """
                SELECT o_kind FROM magicmirror_relay.commit(\(subject), NULL, NULL, 'private', \(subject), 'Todo', 'writer-1',
                    '{}'::text[], '{}'::int8[], '{}'::bytea[], '{}'::boolean[], '{}'::int8[], '{}'::int8[])
                """, on: session.connection)
            #expect(kinds.contains("zone"))
        }
    }

    @Test func aRequestThatRecordsFirstIsRefusedOnceThenItsSessionActsForTheNewUser() async throws {
        try await StaleSession.with { session in
            // With `beforeRole` (the relay's idempotency key, recorded once per request) the
            // refusal is the request's to retry; the session it met is made right meanwhile.
            // Here `beforeRole` also reads, just before `SET ROLE`, whether the session still
            // misses the user (another test's grant would have made it right).
            for _ in 0..<10 {
                let subject = try await session.makeStale()
                let missed = Mutex<Bool?>(nil)
                let acting = PostgreSQLActingUser(role: subject, beforeRole: { connection, _ in
                    let member = try await session.isMember(subject, on: connection)
                    missed.withLock { $0 = $0 ?? !member }
                })
                let run = acting.wrap({ connection in
                    try await StaleSession.text("SELECT current_user::text", on: connection)
                }, logger: Self.logger)
                let first: Result<String, any Error>
                do { first = .success(try await run(session.connection)) } catch { first = .failure(error) }
                guard missed.withLock({ $0 }) == true else { continue }
                let refusal = try #require(throws: MirrorError.self) { try first.get() }
                #expect(refusal.kind == .unavailable && refusal.nothingStored)
                #expect(try await run(session.connection) == subject)
                return
            }
            Issue.record("the session was made right by other grants before each request")
        }
    }
}

/// A database set up for a relay role of its own (so that no other test's role gains its
/// memberships), that role a member of ``fillers`` roles besides its users (so that a
/// session computes its memberships for a while), ``connection``, a session as that role,
/// and ``provisioner``, another, that provisions users as the relay does.
final class StaleSession: Sendable {
    /// How many roles the relay role is a member of, before its users.
    static let fillers = 1_000
    /// How many users ``makeStale()`` provisions at most.
    static let rounds = 500

    let name: String
    let connection: PostgresConnection
    let provisioner: PostgresConnection
    /// The privilege of `pg_has_role` that reads the memberships `SET ROLE` reads.
    let privilege: String

    private init(name: String, connection: PostgresConnection, provisioner: PostgresConnection, privilege: String) {
        (self.name, self.connection, self.provisioner, self.privilege) = (name, connection, provisioner, privilege)
    }

    /// Runs `body` with a fresh database and relay role; drops them, and every role made for
    /// them, afterwards.
    static func with(_ body: (StaleSession) async throws -> Void) async throws {
        let name = RelayTestServer.uniqueName("provisioning")
        _ = try await RelayTestServer.admin("CREATE DATABASE \(name)")
        var opened: [PostgresConnection] = []
        do {
            try await RelaySetup.run(adminURL: RelayTestServer.url(database: name), relayRole: name, environment: [:])
            _ = try await RelayTestServer.admin(
                """
                DO $$ BEGIN
                    FOR i IN 1..\(fillers) LOOP
                        EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT', '\(name)_f' || i);
                        EXECUTE format('GRANT %I TO %I', '\(name)_f' || i, '\(name)');
                    END LOOP;
                END $$
                """, database: name)
            let connection = try await connect(database: name, role: name)
            opened.append(connection)
            let provisioner = try await connect(database: name, role: name)
            opened.append(provisioner)
            let version = try await text("SELECT current_setting('server_version_num')", on: connection)
            let session = StaleSession(
                name: name, connection: connection, provisioner: provisioner,
                privilege: (Int(version) ?? 0) >= 160_000 ? "SET" : "MEMBER")
            try await body(session)
        } catch {
            await drop(name, opened)
            throw error
        }
        await drop(name, opened)
    }

    /// Provisions users until one is provisioned while ``connection`` computes its
    /// memberships, and kept out of them; returns that user: a member of the relay role in the
    /// catalog, for a new session, and not for ``connection``, now and in its later
    /// transactions (no other change of the roles comes).
    func makeStale() async throws -> String {
        let filler = "\(name)_f1"
        for round in 0..<Self.rounds {
            let subject = "\(name)_u\(round)"
            // A grant first, which makes the session drop the lists of memberships it
            // cached for each role (else it computes the relay role's from them, reading no
            // catalog, so no invalidation, meanwhile); computing another role's memberships
            // drops the relay role's; then the relay role's are computed, each role's list
            // read from the catalog, while the user is provisioned on the other session.
            _ = try await Self.texts("SELECT magicmirror_relay.provision(\(name + "_w\(round)"))::text", on: provisioner)
            _ = try await Self.texts("SELECT pg_has_role(\(filler), session_user, \(privilege))::text", on: connection)
            async let computed = Self.texts("SELECT pg_has_role(session_user, \(filler), \(privilege))::text", on: connection)
            async let provisioned = Self.texts("SELECT magicmirror_relay.provision(\(subject))::text", on: provisioner)
            _ = try await (computed, provisioned)
            if try await !isMember(subject, on: connection) {
                #expect(try await !isMember(subject, on: connection), "no other change came: the session keeps its list")
                #expect(try await isMember(subject, on: provisioner), "another session sees the membership")
                let granted = try await Self.text(
                    """
                    SELECT count(*)::text FROM pg_catalog.pg_auth_members
                    WHERE roleid = to_regrole(quote_ident(\(subject))) AND member = to_regrole(quote_ident(session_user))
                    """, on: provisioner)
                #expect(granted == "1", "the catalog holds the membership")
                return subject
            }
        }
        throw MirrorError(.unavailable, "no session missed a grant in \(Self.rounds) provisions")
    }

    /// Whether the relay role may set the role `subject`, as `connection`'s session sees it.
    func isMember(_ subject: String, on connection: PostgresConnection) async throws -> Bool {
        try await Self.text("SELECT pg_has_role(session_user, \(subject), \(privilege))::text", on: connection) == "true"
    }

    static func texts(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [String] {
        var values: [String] = []
        for try await value in try await connection.query(query, logger: RelayTestServer.logger).decode(String?.self) {
            values.append(value ?? "")
        }
        return values
    }

    static func text(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> String {
        try await texts(query, on: connection).first ?? ""
    }

    private static func connect(database: String, role: String) async throws -> PostgresConnection {
        let components = URLComponents(string: RelayTestServer.url(database: database, role: role))
        let configuration = PostgresConnection.Configuration(
            host: components?.host ?? "127.0.0.1", port: components?.port ?? 5432, username: role, password: nil,
            database: database, tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: RelayTestServer.logger)
    }

    private static func drop(_ name: String, _ connections: [PostgresConnection]) async {
        for connection in connections { try? await connection.close() }
        _ = try? await RelayTestServer.admin("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        _ = try? await RelayTestServer.admin(
            """
            DO $$ DECLARE r text; BEGIN
                FOR r IN SELECT rolname FROM pg_catalog.pg_roles WHERE rolname LIKE '\(name)%' ORDER BY rolname DESC LOOP
                    EXECUTE format('DROP ROLE %I', r);
                END LOOP;
            END $$
            """)
    }
}
