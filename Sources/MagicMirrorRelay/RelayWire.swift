import Foundation
import MagicMirror

/// The bodies of the relay protocol's requests and answers (`/v1/…`), shared by
/// ``RelayDatabase`` and `mirror-relay`: JSON, with a record's fields as the base64 of their
/// bytes, so that they come back exactly as saved.
///
/// Not API: the protocol is documented request by request in the article "The relay".
@_spi(RelayProtocol) public enum RelayWire {
    /// The version prefix of every path.
    public static let prefix = "/v1"

    /// A stored record.
    public struct Record: Codable, Sendable, Equatable {
        public var id: String
        public var version: Int
        /// The fields' bytes; `nil` for a tombstone.
        public var fields: Data?
        public var modified: HLCTimestamp
        public var writer: String
        public var created: HLCTimestamp

        public init(_ record: StoredRecord) {
            (id, version, fields) = (record.id, record.version, record.fields)
            (modified, writer, created) = (record.modified, record.writer, record.created)
        }

        public var stored: StoredRecord {
            StoredRecord(id: id, version: version, fields: fields, modified: modified, writer: writer, created: created)
        }
    }

    /// A save (with `fields`) or a delete (without).
    public struct Operation: Codable, Sendable {
        public var id: String
        public var baseVersion: Int
        public var fields: Data?
        public var timestamp: HLCTimestamp

        public init(_ operation: RecordOperation) {
            (id, baseVersion, timestamp) = (operation.recordID, operation.baseVersion, operation.timestamp)
            if case .save(let data) = operation.action { fields = data } else { fields = nil }
        }

        public var operation: RecordOperation {
            RecordOperation(
                recordID: id, baseVersion: baseVersion, action: fields.map { .save($0) } ?? .delete,
                timestamp: timestamp)
        }
    }

    /// `POST /v1/commit`, with the header `Idempotency-Key`.
    public struct CommitRequest: Codable, Sendable {
        public var zone: ZoneID
        /// The client's writer id, which the records are stored under.
        public var writerID: String
        public var operations: [Operation]

        public init(zone: ZoneID, writerID: String, operations: [Operation]) {
            (self.zone, self.writerID, self.operations) = (zone, writerID, operations)
        }
    }

    /// One operation's result: `applied` (with the record), `conflict` (with the current
    /// record, if any) or `notApplied`.
    public struct Result: Codable, Sendable {
        public var status: String
        public var record: Record?

        public init(_ result: CommitOutcome.Result) {
            switch result {
            case .applied(let record): (status, self.record) = ("applied", Record(record))
            case .conflict(let current): (status, record) = ("conflict", current.map(Record.init))
            case .notApplied: (status, record) = ("notApplied", nil)
            }
        }

        public var result: CommitOutcome.Result? {
            switch status {
            case "applied": record.map { .applied($0.stored) }
            case "conflict": .conflict(current: record?.stored)
            case "notApplied": .notApplied
            default: nil
            }
        }
    }

    /// The answer to a commit. `replayed` is set when the idempotency key was already
    /// applied: nothing was stored again.
    public struct CommitResponse: Codable, Sendable {
        public var results: [Result]
        public var token: ChangeToken
        public var replayed: Bool

        public init(_ outcome: CommitOutcome, replayed: Bool) {
            (results, token, self.replayed) = (outcome.results.map(Result.init), outcome.token, replayed)
        }
    }

    /// `POST /v1/changes`: the changes after `since` (the relay refuses a request without it:
    /// every live record comes from `/v1/records`, in pages).
    public struct ChangesRequest: Codable, Sendable {
        public var zone: ZoneID
        public var since: ChangeToken?

        public init(zone: ZoneID, since: ChangeToken?) { (self.zone, self.since) = (zone, since) }
    }

    /// A change set.
    public struct Changes: Codable, Sendable {
        public var records: [Record]
        public var token: ChangeToken
        public var isComplete: Bool

        public init(_ changes: ChangeSet) {
            (records, token, isComplete) = (changes.records.map(Record.init), changes.token, changes.isComplete)
        }

        public var changeSet: ChangeSet {
            ChangeSet(records: records.map(\.stored), token: token, isComplete: isComplete)
        }
    }

    /// `POST /v1/records`: one page of the live records, in the byte order of their ids,
    /// after the id `after`; `next` is the id to ask after for the following page.
    public struct PageRequest: Codable, Sendable {
        public var zone: ZoneID
        public var after: String?
        public var limit: Int

        public init(zone: ZoneID, after: String?, limit: Int) { (self.zone, self.after, self.limit) = (zone, after, limit) }
    }

    /// A page of live records and the token they reflect.
    public struct Page: Codable, Sendable {
        public var records: [Record]
        public var token: ChangeToken
        public var next: String?

        public init(records: [Record], token: ChangeToken, next: String?) {
            (self.records, self.token, self.next) = (records, token, next)
        }
    }

    /// `POST /v1/fetch`: the live records with these ids.
    public struct FetchRequest: Codable, Sendable {
        public var zone: ZoneID
        public var ids: [String]

        public init(zone: ZoneID, ids: [String]) { (self.zone, self.ids) = (zone, ids) }
    }

    /// The records `POST /v1/fetch` found.
    public struct Records: Codable, Sendable {
        public var records: [Record]

        public init(records: [Record]) { self.records = records }
    }

    /// `POST /v1/token`: a zone's current token.
    public struct TokenRequest: Codable, Sendable {
        public var zone: ZoneID

        public init(zone: ZoneID) { self.zone = zone }
    }

    /// `POST /v1/share`: shares records of the subject's private zone with a user.
    public struct ShareRequest: Codable, Sendable {
        public var zone: ZoneID
        public var ids: [String]
        /// The recipient's user name.
        public var recipient: String
        public var access: ShareAccess

        public init(zone: ZoneID, ids: [String], recipient: String, access: ShareAccess) {
            (self.zone, self.ids, self.recipient, self.access) = (zone, ids, recipient, access)
        }
    }

    /// `POST /v1/revoke`: ends shares of records of the subject's private zone with a user.
    public struct RevokeRequest: Codable, Sendable {
        public var zone: ZoneID
        public var ids: [String]
        /// The recipient's user name.
        public var recipient: String

        public init(zone: ZoneID, ids: [String], recipient: String) {
            (self.zone, self.ids, self.recipient) = (zone, ids, recipient)
        }
    }

    /// `POST /v1/shares`: the shares in effect of the subject's private or shared zone.
    public struct SharesRequest: Codable, Sendable {
        public var zone: ZoneID

        public init(zone: ZoneID) { self.zone = zone }
    }

    /// One share: a record, its owner and recipient (user names), and the access.
    public struct Share: Codable, Sendable, Equatable {
        public var recordID: String
        public var recordType: String
        public var owner: String
        public var recipient: String
        public var access: ShareAccess

        public init(_ share: RecordShare) {
            (recordID, recordType, access) = (share.recordID, share.recordType, share.access)
            (owner, recipient) = (share.owner.name, share.recipient.name)
        }

        /// The share, or `nil` when a name is not a user's.
        public var recordShare: RecordShare? {
            guard let owner = try? MirrorUser(name: owner), let recipient = try? MirrorUser(name: recipient) else { return nil }
            return RecordShare(recordID: recordID, recordType: recordType, owner: owner, recipient: recipient, access: access)
        }
    }

    /// The answer to `POST /v1/shares`.
    public struct Shares: Codable, Sendable {
        public var shares: [Share]

        public init(shares: [Share]) { self.shares = shares }
    }

    /// The answer to a request that returns nothing: `{"done": true}`.
    public struct Done: Codable, Sendable {
        public var done: Bool

        public init() { done = true }
    }

    /// `POST /v1/assets/store?zone=…&writer=…`: the asset's bytes are the request's body
    /// (`application/octet-stream`); the query (``assetQuery(zone:writerID:)``) names the zone
    /// and the client's writer id, which keeps the asset from collection until a commit of
    /// that writer refers to it. The answer is the ``Asset`` as JSON
    /// (`{"$asset": digest, "size": bytes}`).
    ///
    /// The query: `zone=` and the zone's JSON, `&writer=` and the writer id, every byte but
    /// ASCII letters, digits and `-._~` percent-encoded.
    public static func assetQuery(zone: ZoneID, writerID: String) throws -> String {
        let json: Data
        do {
            json = try JSONEncoder().encode(zone)
        } catch {
            throw MirrorError(.encodingFailed, "encoding a zone for the relay: \(error)", underlying: error)
        }
        return "zone=" + percentEncoded(json) + "&writer=" + percentEncoded(Data(writerID.utf8))
    }

    /// The value of the query item `name`, percent-decoded, or `nil`.
    public static func queryItem(_ name: String, in query: String?) -> String? {
        guard let query else { return nil }
        for item in query.split(separator: "&") where item.hasPrefix(name + "=") {
            return String(item.dropFirst(name.utf8.count + 1)).removingPercentEncoding
        }
        return nil
    }

    private static func percentEncoded(_ bytes: Data) -> String {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        var text = ""
        for byte in bytes {
            if unreserved.contains(byte) {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                text += (hex.count == 1 ? "%0" : "%") + hex
            }
        }
        return text
    }

    /// `POST /v1/assets/contents`: the asset's bytes, as the answer's body
    /// (`application/octet-stream`, its `Content-Length` the asset's size). With `cached`,
    /// the client holds a file of the asset's size: the relay only checks that the zone holds
    /// the asset for the user, and answers 204 without the bytes.
    public struct AssetRequest: Codable, Sendable {
        public var zone: ZoneID
        public var asset: Asset
        public var cached: Bool?

        public init(zone: ZoneID, asset: Asset, cached: Bool) { (self.zone, self.asset, self.cached) = (zone, asset, cached) }
    }

    /// `POST /v1/assets/collect`: removes the zone's assets that nothing refers to.
    public struct CollectRequest: Codable, Sendable {
        public var zone: ZoneID

        public init(zone: ZoneID) { self.zone = zone }
    }

    /// The answer to `POST /v1/assets/collect`: how many assets were removed.
    public struct Collected: Codable, Sendable {
        public var removed: Int

        public init(removed: Int) { self.removed = removed }
    }

    /// A zone and a token: what a client knows of a zone it watches, or a hint that the
    /// zone changed.
    public struct ZoneToken: Codable, Sendable, Equatable {
        public var zone: ZoneID
        public var token: ChangeToken

        public init(zone: ZoneID, token: ChangeToken) { (self.zone, self.token) = (zone, token) }
    }

    /// `POST /v1/watch`, the long poll: the zones a client watches and the tokens it knows.
    /// The answer comes when a hint is queued, or after ``pollSeconds`` with none.
    /// `POST /v1/stream` takes the same body and answers a stream of lines, each a ``Hints``
    /// object (empty: a heartbeat, at least every ``pollSeconds``), for ``streamSeconds``.
    public struct WatchRequest: Codable, Sendable {
        /// A random id the client keeps for its connection's life.
        public var session: String
        public var zones: [ZoneToken]

        public init(session: String, zones: [ZoneToken]) { (self.session, self.zones) = (session, zones) }
    }

    /// Hints: what changed, at most one per zone and reason, the record ids of the changes
    /// coalesced since the last answer (cut at ``maximumHintIDs``), with the zone's latest
    /// token.
    public struct Hints: Codable, Sendable {
        public var hints: [RemoteNotification]

        public init(hints: [RemoteNotification]) { self.hints = hints }
    }

    /// The most record ids one hint carries; a hint is only a hint, and the client pulls.
    public static let maximumHintIDs = 1_000
    /// The most zones one client may watch on one connection.
    public static let maximumWatchedZones = 256

    /// How long the relay holds a long poll without news (its heartbeat), and the most time
    /// between two lines of a stream.
    public static let pollSeconds = 5
    /// How long the relay keeps a stream (`/v1/stream`) open, at most (less when the token
    /// expires sooner); the client opens another.
    public static let streamSeconds = 60
    /// How long either side waits for the other before it takes the link for dead.
    public static let deadLinkSeconds = 10

    /// Every error's body: `{ "error": { "code": "...", "message": "..." } }`.
    public struct ErrorBody: Codable, Sendable {
        public struct Detail: Codable, Sendable {
            /// A `MirrorError` kind (`invalidName`, `permissionDenied`, …) or one of the
            /// relay's: `unauthorized`, `tokenExpired`, `badRequest`, `notFound`,
            /// `payloadTooLarge`.
            public var code: String
            public var message: String
            /// Whether the relay knows that nothing was stored.
            public var nothingStored: Bool?
            public var recordIDs: [String]?

            public init(code: String, message: String, nothingStored: Bool? = nil, recordIDs: [String]? = nil) {
                (self.code, self.message, self.nothingStored, self.recordIDs) = (code, message, nothingStored, recordIDs)
            }
        }

        public var error: Detail

        public init(_ error: Detail) { self.error = error }
    }

    /// At most one notification per reason for changed records: `deleted` for tombstones,
    /// `created` when the record's creation clock is its last change, `updated` otherwise.
    public static func notifications(
        _ records: [StoredRecord], zone: ZoneID, token: ChangeToken, writer: String?, identifier: String
    ) -> [RemoteNotification] {
        var byReason: [RemoteNotification.Reason: [String]] = [:]
        var order: [RemoteNotification.Reason] = []
        for record in records {
            let reason: RemoteNotification.Reason =
                record.isDeleted ? .deleted : record.created == record.modified ? .created : .updated
            if byReason[reason] == nil { order.append(reason) }
            byReason[reason, default: []].append(record.id)
        }
        return order.map { reason in
            RemoteNotification(
                databaseIdentifier: identifier, zone: zone, recordIDs: byReason[reason] ?? [], reason: reason,
                token: token, writer: writer)
        }
    }
}
