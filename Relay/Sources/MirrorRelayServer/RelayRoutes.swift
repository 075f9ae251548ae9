import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MagicMirror
@_spi(Relay) import MagicMirrorPostgreSQL
@_spi(RelayProtocol) import MagicMirrorRelay
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The protocol's requests (see the article "The relay"): each checks the token, reads
/// and checks its body, then acts as the token's subject.
struct RelayRoutes: Sendable {
    /// The largest commit body, and the largest body of any other request.
    static let maximumCommitBytes = 96 * 1024 * 1024
    static let maximumRequestBytes = 1024 * 1024
    /// The most records a page of `/v1/records` carries.
    static let maximumPageSize = 5_000
    /// How far ahead of the relay's clock, in milliseconds, an operation's timestamp may be:
    /// five minutes, as far as MagicMirror's clocks adopt a reading made elsewhere.
    static let maximumTimestampLead: Int64 = 5 * 60 * 1000

    let tokens: RelayTokens
    let users: RelayUsers
    let hub: RelayHub
    /// The largest asset an upload may carry (`--max-asset-bytes`).
    let maximumAssetBytes: Int
    /// The request bodies held at once (`--max-inflight-bytes`).
    let budget: RelayBodyBudget
    let logger: Logger

    func add(to router: Router<RelayRequestContext>) {
        router.get("health") { _, _ in json(["status": "ok"]) }
        router.post("v1/commit") { request, _ in try await commit(request) }
        router.post("v1/changes") { request, _ in
            try await serve(request, RelayWire.ChangesRequest.self) { body, database in
                // Every live record comes in pages (/v1/records), never as one answer built whole.
                guard let since = body.since else {
                    throw RelayFailure.badRequest("a request for changes names a token (since); every live record comes in pages from /v1/records")
                }
                return json(RelayWire.Changes(try await database.changes(in: body.zone, since: since)))
            }
        }
        router.post("v1/records") { request, _ in
            try await serve(request, RelayWire.PageRequest.self) { body, database in
                guard (1...Self.maximumPageSize).contains(body.limit) else {
                    throw RelayFailure.badRequest("a page's limit is 1 to \(Self.maximumPageSize)")
                }
                if body.zone.scope != .shared {
                    // One keyset page of the zone's live records (never the whole zone per page).
                    let page = try await database.livePage(in: body.zone, after: body.after, limit: body.limit)
                    return json(RelayWire.Page(records: page.records.map(RelayWire.Record.init), token: page.token, next: page.next))
                }
                // A shared zone (the records other users share with this one) is read whole.
                let all = try await database.fetchAll(in: body.zone)
                let sorted = all.records.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
                let after = body.after.map { after in sorted.firstIndex { after.utf8.lexicographicallyPrecedes($0.id.utf8) } ?? sorted.endIndex } ?? 0
                let page = sorted[after...].prefix(body.limit)
                let next = after + page.count < sorted.count ? page.last?.id : nil
                return json(RelayWire.Page(records: page.map(RelayWire.Record.init), token: all.token, next: next))
            }
        }
        router.post("v1/fetch") { request, _ in
            try await serve(request, RelayWire.FetchRequest.self) { body, database in
                json(RelayWire.Records(records: try await database.fetch(body.ids, in: body.zone).map(RelayWire.Record.init)))
            }
        }
        router.post("v1/token") { request, _ in
            try await serve(request, RelayWire.TokenRequest.self) { body, database in
                json(try await database.currentToken(in: body.zone))
            }
        }
        router.post("v1/share") { request, _ in
            try await serve(request, RelayWire.ShareRequest.self) { body, database, subject in
                try Self.checkOwn(body.zone, subject: subject, "share records of")
                let recipient = try Self.user(body.recipient)
                // The ids' names first (the rules of a commit's ids), so that a malformed
                // request is a 400 whoever it names.
                try RecordOperation.validate(
                    Set(body.ids).map { .delete($0, baseVersion: 0, timestamp: HLCTimestamp(millis: 0, counter: 0)) }, in: body.zone)
                guard RelayTokens.problem(withSubject: body.recipient) == nil, try await users.isUser(body.recipient) else {
                    throw RelayFailure(
                        .notFound, "notFound",
                        "\(body.recipient) is no user of this relay: a share names a user who has used it (the subject of a token)")
                }
                try await database.share(body.ids, in: body.zone, with: recipient, access: body.access)
                return json(RelayWire.Done())
            }
        }
        router.post("v1/revoke") { request, _ in
            try await serve(request, RelayWire.RevokeRequest.self) { body, database, subject in
                try Self.checkOwn(body.zone, subject: subject, "revoke shares of")
                let recipient = try Self.user(body.recipient)
                try await database.revokeShares(of: body.ids, in: body.zone, from: recipient)
                return json(RelayWire.Done())
            }
        }
        router.post("v1/shares") { request, _ in
            try await serve(request, RelayWire.SharesRequest.self) { body, database, subject in
                try Self.checkOwn(body.zone, subject: subject, "list the shares of")
                return json(RelayWire.Shares(shares: try await database.shares(in: body.zone).map(RelayWire.Share.init)))
            }
        }
        addAssets(to: router)
        router.post("v1/watch") { request, _ in
            let subject = try await tokens.subject(authorization: request.headers[.authorization])
            // The body is small and read at once: it is not held while the poll waits.
            let body = try await withBody(request, RelayWire.WatchRequest.self, limit: Self.maximumRequestBytes, subject: subject) { $0 }
            let database = try await users.database(for: subject)
            return json(RelayWire.Hints(hints: try await hub.poll(body, subject: subject, database: database)))
        }
        router.post("v1/stream") { request, context in try await stream(request, channel: context.channel) }
    }

    /// `/v1/stream`: the long poll's body, answered with a line of hints (JSON, `\n`) each
    /// time some are queued and an empty one at least every `RelayWire.pollSeconds`, until
    /// `RelayWire.streamSeconds` passed or the token expires. The client's request is one
    /// per stream, not one per answer: under load, each hint costs the relay a write, not a
    /// request (see the article "The relay").
    private func stream(_ request: Request, channel: any Channel) async throws -> Response {
        let (subject, expires) = try await tokens.verified(authorization: request.headers[.authorization])
        let body = try await withBody(request, RelayWire.WatchRequest.self, limit: Self.maximumRequestBytes, subject: subject) { $0 }
        let database = try await users.database(for: subject)
        let ends = ContinuousClock.now + .seconds(min(Double(RelayWire.streamSeconds), expires.timeIntervalSinceNow))
        let stream = try await hub.openStream(body, subject: subject, database: database, until: ends)
        let hub = hub
        return Response(
            status: .ok, headers: [.contentType: "application/x-ndjson", .cacheControl: "no-store"],
            body: ResponseBody { writer in
                // The head is written: from here the hub writes the stream's lines on its
                // connection's loop (StreamOutlet). Counted against the user's streams until
                // the last chunk is written: a client that stops reading holds its stream
                // until that write fails, or the hub closes its connection the dead-link
                // time after the stream's end.
                let started = hub.started(stream, outlet: StreamOutlet(channel: channel))
                if started {
                    // The relay shutting down (SIGTERM) ends the stream at once.
                    await withGracefulShutdownHandler {
                        for await _ in stream.ended {}
                    } onGracefulShutdown: {
                        hub.stop(stream)
                    }
                }
                // No line may follow the last chunk: the hub stops writing first.
                hub.stop(stream)
                defer { hub.close(stream, started: started) }
                try await writer.finish(nil)
            })
    }

    /// A read: token, body, then `body` as the subject.
    func serve<Body: Decodable & Sendable>(
        _ request: Request, _ type: Body.Type,
        _ handle: @escaping @Sendable (Body, PostgreSQLDatabase) async throws -> Response
    ) async throws -> Response {
        try await serve(request, type) { body, database, _ in try await handle(body, database) }
    }

    /// A request as the subject, whose `handle` is told the subject.
    func serve<Body: Decodable & Sendable>(
        _ request: Request, _ type: Body.Type,
        _ handle: @escaping @Sendable (Body, PostgreSQLDatabase, String) async throws -> Response
    ) async throws -> Response {
        let subject = try await tokens.subject(authorization: request.headers[.authorization])
        return try await withBody(request, type, limit: Self.maximumRequestBytes, subject: subject) { body in
            let database = try await users.database(for: subject)
            return try await PostgreSQLActingUser.$current.withValue(PostgreSQLActingUser(role: subject)) {
                try await handle(body, database, subject)
            }
        }
    }

    /// Refuses a private or shared zone of another user than `subject` (403
    /// `permissionDenied`): a user commits to, shares, revokes, lists the shares of and
    /// collects the assets of their own zones only. Row-level security would refuse each
    /// row, or show such a request nothing; the relay says so instead, also where no row is
    /// reached (an empty commit).
    static func checkOwn(_ zone: ZoneID, subject: String, _ action: String) throws {
        guard zone.scope != .public, zone.user != subject else { return }
        throw RelayFailure(MirrorError(
            .permissionDenied,
            "\(subject) may not \(action) zone \(zone): it is \(zone.user.map { "user \($0)'s" } ?? "no user's") "
                + "\(zone.scope) zone, and a user acts on their own zones only",
            recordType: zone.recordType, scope: zone.scope))
    }

    /// The user a request names, or a 400.
    static func user(_ name: String) throws -> MirrorUser {
        do {
            return try MirrorUser(name: name)
        } catch {
            throw RelayFailure.badRequest("\(String(reflecting: name)) is not a user name: \(error)")
        }
    }

    /// A commit, applied once per idempotency key: the key is recorded in the commit's own
    /// transaction, so a retry after a lost answer finds it, stores nothing again, and is
    /// answered with the stored records (`replayed`). One statement, `magicmirror_relay.commit`,
    /// for a private or public zone (see `RelaySetup.commitFunction`).
    private func commit(_ request: Request) async throws -> Response {
        let subject = try await tokens.subject(authorization: request.headers[.authorization])
        return try await withBody(request, RelayWire.CommitRequest.self, limit: Self.maximumCommitBytes, subject: subject) { body in
            try await commit(body, subject: subject, key: request.headers[CommitClaim.header])
        }
    }

    /// The SQLSTATE the server answered, under a `MirrorError`.
    static func state(of error: any Error) -> String? {
        ((error as? MirrorError)?.underlying as? PSQLError)?.serverInfo?[.sqlState]
    }

    private func commit(_ body: RelayWire.CommitRequest, subject: String, key: String?) async throws -> Response {
        // Row-level security refuses every operation in another user's zone; an empty commit
        // reaches no row, and would be answered with the zone's token.
        try Self.checkOwn(body.zone, subject: subject, "write")
        if let key {
            guard (1...128).contains(key.utf8.count),
                key.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || $0 == "-") })
            else { throw RelayFailure.badRequest("an Idempotency-Key is 1 to 128 letters, digits and dashes") }
        }
        guard (1...255).contains(body.writerID.utf8.count), body.writerID.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) else {
            throw RelayFailure.badRequest("a commit's writerID is 1 to 255 bytes without control characters")
        }
        // A timestamp far ahead of every clock would win every merge of its fields for as long
        // as it is ahead: refused, as MagicMirror's clocks refuse to adopt such a reading.
        let latest = Int64(Date().timeIntervalSince1970 * 1000) + Self.maximumTimestampLead
        let before = body.operations.filter { $0.timestamp.millis < 0 }.map(\.id)
        guard before.isEmpty else {
            throw RelayFailure(MirrorError(
                .invalidRecord,
                "the timestamp of \(before.count) operation\(before.count == 1 ? "" : "s") is before 1970; check this device's clock",
                recordIDs: Array(before.prefix(100))))
        }
        let ahead = body.operations.filter { $0.timestamp.millis > latest }.map(\.id)
        guard ahead.isEmpty else {
            throw RelayFailure(MirrorError(
                .invalidRecord,
                "the timestamp of \(ahead.count) operation\(ahead.count == 1 ? "" : "s") is more than "
                    + "\(Self.maximumTimestampLead / 60_000) minutes ahead of the relay's clock; check this device's clock",
                recordIDs: Array(ahead.prefix(100))))
        }
        let database = try await users.database(for: subject)
        let operations = body.operations.map(\.operation)
        let canonical = JSONEncoder()
        canonical.outputFormatting = .sortedKeys
        let claim = CommitClaim(
            subject: subject, writer: body.writerID, key: key, body: key == nil ? Data() : try canonical.encode(body))
        // One statement, magicmirror_relay.commit (see RelaySetup); a linked commit (delete
        // rules) in a transaction that records the claim first.
        let replayed = Mutex(false)
        let function = PostgreSQLActingUser.CommitFunction(
            name: "magicmirror_relay.commit", arguments: [subject, key, key.map { _ in claim.digest }]
        ) { kind in if kind == "replayed" { replayed.withLock { $0 = true } } }
        let claiming = PostgreSQLActingUser(
            role: subject, writerID: body.writerID, beforeRole: claim.record, commitFunction: function)
        do {
            let outcome = try await PostgreSQLActingUser.$current.withValue(claiming) {
                try await database.commit(operations, to: body.zone)
            }
            return json(RelayWire.CommitResponse(outcome, replayed: replayed.withLock { $0 }))
        } catch let error as MirrorError where Self.state(of: error) == RelaySetup.CommitState.roleRefused {
            let said = (error.underlying as? PSQLError)?.serverInfo?[.message] ?? error.message
            var refused = MirrorError(.unavailable, "committing to \(body.zone): \(said); nothing was done; try again")
            refused.nothingStored = true
            throw refused
        } catch let error as MirrorError where Self.state(of: error) == "42883" {
            logger.error("magicmirror_relay.commit is missing: run mirror-relay setup with this relay's version")
            var outdated = MirrorError(
                .unavailable, "the relay's database was set up by another version of mirror-relay; nothing was stored")
            outdated.nothingStored = true
            throw outdated
        } catch where claim.writerRefused || Self.state(of: error) == RelaySetup.CommitState.writerTaken {
            throw RelayFailure(
                .forbidden, "writerTaken", "this writerID is another user's: each writer id belongs to the user who first committed under it")
        } catch where claim.bodyDiffered || Self.state(of: error) == RelaySetup.CommitState.keyReused {
            throw RelayFailure(
                .conflict, "idempotencyKeyReused",
                "this Idempotency-Key was used before for another commit; nothing was stored")
        } catch where claim.wasAppliedBefore {
            // Applied before: the database recognises each operation as a retry by its writer
            // and timestamp, and answers with what is stored.
            let outcome = try await PostgreSQLActingUser.$current.withValue(
                PostgreSQLActingUser(role: subject, writerID: body.writerID)
            ) { try await database.commit(operations, to: body.zone) }
            logger.info("replayed a commit", metadata: ["subject": "\(subject)", "key": "\(key ?? "")"])
            return json(RelayWire.CommitResponse(outcome, replayed: true))
        }
    }
}

/// A commit's idempotency key and the SHA-256 of its body. A commit of a private or public
/// zone records them in `magicmirror_relay.commit` (see `RelaySetup`); a linked commit (one
/// that delete rules reach) and a shared zone's commit record them here, first in the
/// commit's transaction (as the relay's role, before `SET LOCAL ROLE`): the row commits or
/// rolls back with the commit. A key found with another body's digest is a reuse, not a retry.
final class CommitClaim: Sendable {
    static let header = HTTPField.Name("Idempotency-Key")!
    private enum Found { case new, sameBody, otherBody, otherWriter }
    let subject: String
    /// The client's writer id, bound to the first subject that commits under it.
    let writer: String
    let key: String?
    /// The SHA-256 of the commit's body (its JSON with sorted keys) in lowercase
    /// hexadecimal, stored with the key.
    let digest: String
    /// `nil` until recorded.
    private let recorded = Mutex<Found?>(nil)

    init(subject: String, writer: String, key: String?, body: Data) {
        (self.subject, self.writer, self.key) = (subject, writer, key)
        digest = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether the key was found recorded with this body: the commit was applied before.
    var wasAppliedBefore: Bool { recorded.withLock { $0 == .sameBody } }
    /// Whether the key was found recorded with another body.
    var bodyDiffered: Bool { recorded.withLock { $0 == .otherBody } }
    /// Whether the writer id was found bound to another subject.
    var writerRefused: Bool { recorded.withLock { $0 == .otherWriter } }

    /// Binds the writer id to the subject, or throws when it is another's; then records the
    /// key, once per request, and throws when it was recorded before. One statement, so one
    /// round trip of the commit's transaction, and a second for a key recorded before.
    func record(on connection: PostgresConnection, logger: Logger) async throws {
        guard recorded.withLock({ $0 == nil }) else { return }
        // The key's row is claimed only for a writer that is the subject's.
        let rows = try await connection.query(
            """
            WITH bound AS (
                INSERT INTO magicmirror_relay.writers (writer, subject) VALUES (\(writer), \(subject))
                ON CONFLICT DO NOTHING RETURNING subject),
            owner AS (
                SELECT coalesce((SELECT subject FROM bound),
                                (SELECT subject FROM magicmirror_relay.writers WHERE writer = \(writer)), \(subject)) = \(subject)
                       AS own),
            claimed AS (
                INSERT INTO magicmirror_relay.commits (subject, key, digest)
                SELECT \(subject), \(key), decode(\(digest), 'hex')
                WHERE \(key)::text IS NOT NULL AND (SELECT own FROM owner)
                ON CONFLICT DO NOTHING RETURNING 1)
            SELECT (SELECT own FROM owner), (SELECT count(*) FROM claimed)::int8
            """, logger: logger)
        var found = Found.new
        for try await (own, inserted) in rows.decode((Bool, Int64).self) {
            found = !own ? .otherWriter : key == nil || inserted > 0 ? .new : .sameBody
        }
        if found == .sameBody {
            // The key was recorded before: its digest, read in a statement of its own, whose
            // snapshot sees the row that a commit sent at the same moment recorded (the insert
            // above waited for it, but its statement's snapshot is older than that row).
            let same = try await connection.query(
                """
                SELECT coalesce((SELECT digest IS NULL OR digest = decode(\(digest), 'hex') FROM magicmirror_relay.commits
                                 WHERE subject = \(subject) AND key = \(key)), false)
                """, logger: logger)
            for try await isSame in same.decode(Bool.self) where !isSame { found = .otherBody }
        }
        recorded.withLock { $0 = found }
        switch found {
        case .new: return
        case .otherWriter: throw RelayFailure(.forbidden, "writerTaken", "the writer id is another user's")
        case .sameBody: throw RelayFailure(.conflict, "replayed", "the commit was applied before")
        case .otherBody: throw RelayFailure(.conflict, "idempotencyKeyReused", "the key was used for another commit")
        }
    }
}

/// Every error as the protocol's JSON error, unknown paths included.
struct RelayErrorMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return RelayFailure.response(for: error)
        }
    }
}
