import Foundation

/// What a ``ReplicatedDatabase`` keeps in its replica for one record: the record as the
/// remote last showed it, the local change the remote has not accepted yet (the outbox
/// entry), and the record as mirrors see it (the *view*: its version, clocks and writer).
///
/// Stored as the fields of one record of the replica's `JSONFileDatabase`, so a local change
/// and the view it makes are written together, atomically and durably, and every process
/// sharing the replica sees them. In JSON (keys sorted, record fields embedded as they are):
///
/// ```json
/// {"created":"1763703120123-0","local":{"fields":{"title":"Milk"},"timestamp":"1763703125000-0"},
///  "modified":"1763703125000-0","remote":{"created":"1763703120123-0","fields":{"title":"Mlik"},
///  "modified":"1763703120123-0","version":3,"writer":"w1"},"version":4,"writer":"w2"}
/// ```
///
/// `remote` is absent while the remote never showed the record, `local` while no change is
/// waiting. A `fields` of `null` is a deletion.
struct ReplicaEnvelope: Equatable, Sendable {
    /// A change made through the replica that the remote has not accepted yet.
    struct LocalChange: Equatable, Sendable {
        /// The fields to save, or `nil` to delete the record.
        var fields: Data?
        /// When the change was made; it is pushed under this clock reading.
        var timestamp: HLCTimestamp
    }

    /// The view's version: one more with every change mirrors see.
    var version = 0
    /// The view's creation clock.
    var created = HLCTimestamp.zero
    /// The clock reading of the change that produced the view.
    var modified = HLCTimestamp.zero
    /// The writer of the change that produced the view.
    var writer = ""
    /// The record as the remote stores it, as far as the replica knows (a tombstone when it
    /// was deleted there).
    var remote: StoredRecord?
    /// The change waiting for the remote, if any.
    var local: LocalChange?

    /// The envelope of a record the replica does not hold yet: no view, nothing remote.
    init() {}

    /// The fields mirrors see: the local change's, else the remote's; `nil` when deleted.
    var viewFields: Data? {
        if let local { return local.fields }
        return remote?.fields
    }

    /// The record as mirrors see it.
    func view(_ id: String) -> StoredRecord {
        StoredRecord(id: id, version: version, fields: viewFields, modified: modified, writer: writer, created: created)
    }

    /// The remote version a push of ``local`` is based on.
    var remoteBaseVersion: Int { remote?.version ?? 0 }

    /// The operation that pushes ``local``.
    func push(_ id: String) -> RecordOperation? {
        guard let local else { return nil }
        if let fields = local.fields {
            return .save(id, fields: fields, baseVersion: remoteBaseVersion, timestamp: local.timestamp)
        }
        return .delete(id, baseVersion: remoteBaseVersion, timestamp: local.timestamp)
    }

    // MARK: Changes

    /// The envelope after a change made through the replica.
    func applyingLocal(_ operation: RecordOperation, writer: String) -> ReplicaEnvelope {
        var next = self
        let wasLive = viewFields != nil
        switch operation.action {
        case .save(let fields):
            next.local = LocalChange(fields: fields, timestamp: operation.timestamp)
            if !wasLive { next.created = operation.timestamp }
        case .delete:
            // A record the remote does not hold needs no push to be deleted.
            let remoteIsLive = remote.map { !$0.isDeleted } ?? false
            next.local = remoteIsLive ? LocalChange(fields: nil, timestamp: operation.timestamp) : nil
        }
        next.version = StoredRecord.version(after: version)
        next.modified = operation.timestamp
        next.writer = writer
        return next
    }

    /// The envelope after the remote showed `record` (`nil`: the remote no longer lists it).
    /// The view follows only when no local change is waiting; the caller checks that.
    func applyingRemote(_ record: StoredRecord?, id: String) -> ReplicaEnvelope {
        var next = self
        next.remote = record
        next.followView(from: self)
        return next
    }

    /// The envelope after the remote accepted the push of the local change made at
    /// `timestamp`, storing `record`. A newer local change stays waiting, now based on it.
    func accepting(_ record: StoredRecord, pushedAt timestamp: HLCTimestamp) -> ReplicaEnvelope {
        var next = self
        next.remote = record
        if local?.timestamp == timestamp {
            next.local = nil
            if !record.isDeleted { next.created = record.created }
        }
        return next
    }

    /// The envelope after a conflict of the push made at `timestamp` with the remote's
    /// `current` record was settled; `nil` when the local change moved on meanwhile (the next
    /// push settles the newer change).
    func settling(
        _ resolution: PushResolution, current: StoredRecord?, pushedAt timestamp: HLCTimestamp,
        writer: String, now: HLCTimestamp
    ) -> ReplicaEnvelope? {
        guard local?.timestamp == timestamp else { return nil }
        var next = self
        next.remote = current
        switch resolution {
        case .save(let fields):
            next.local = LocalChange(fields: fields, timestamp: now)
        case .delete:
            let remoteIsLive = current.map { !$0.isDeleted } ?? false
            next.local = remoteIsLive ? LocalChange(fields: nil, timestamp: now) : nil
        case .keepRemote:
            next.local = nil
        case .hold:
            return nil
        }
        if next.local != nil {
            if next.viewFields != viewFields || (next.viewFields == nil) != (viewFields == nil) {
                next.version = StoredRecord.version(after: version)
                next.modified = now
                next.writer = writer
            }
        } else {
            next.followView(from: self)
        }
        return next
    }

    /// Moves the view to the remote record when the visible fields changed.
    private mutating func followView(from previous: ReplicaEnvelope) {
        guard local == nil else { return }
        let before = previous.viewFields
        let after = viewFields
        guard before != after || (before == nil) != (after == nil) else { return }
        version = StoredRecord.version(after: previous.version)
        if let remote {
            modified = remote.modified
            writer = remote.writer
            if !remote.isDeleted { created = remote.created }
        } else {
            modified = HybridLogicalClock.shared.now()
        }
    }

    // MARK: JSON

    /// The envelope as the fields of a replica record.
    func encoded() -> Data {
        var writer = JSONByteWriter(capacity: 128 + (viewFields?.count ?? 0) + (remote?.fields?.count ?? 0))
        writer.append("{\"created\":")
        writer.append(created)
        if let local {
            writer.append(",\"local\":{\"fields\":")
            Self.append(local.fields, to: &writer)
            writer.append(",\"timestamp\":")
            writer.append(local.timestamp)
            writer.append("}")
        }
        writer.append(",\"modified\":")
        writer.append(modified)
        if let remote {
            writer.append(",\"remote\":{\"created\":")
            writer.append(remote.created)
            writer.append(",\"fields\":")
            Self.append(remote.fields, to: &writer)
            writer.append(",\"modified\":")
            writer.append(remote.modified)
            writer.append(",\"version\":")
            writer.append(remote.version)
            writer.append(",\"writer\":")
            writer.append(string: remote.writer)
            writer.append("}")
        }
        writer.append(",\"version\":")
        writer.append(version)
        writer.append(",\"writer\":")
        writer.append(string: self.writer)
        writer.append("}")
        return Data(writer.bytes)
    }

    private static func append(_ fields: Data?, to writer: inout JSONByteWriter) {
        if let fields { writer.append(raw: fields) } else { writer.append("null") }
    }

    /// Reads an envelope from a replica record's fields; `nil` when they are not one.
    init?(decoding data: Data, id: String) {
        guard let members = JSONFieldMerge.members(of: data),
              let version = members["version"].flatMap({ Self.int($0.value) }),
              let created = members["created"].flatMap({ Self.clock($0.value) }),
              let modified = members["modified"].flatMap({ Self.clock($0.value) }),
              let writer = members["writer"].flatMap({ Self.string($0.value) })
        else { return nil }
        self.version = version
        self.created = created
        self.modified = modified
        self.writer = writer
        if let local = members["local"] {
            guard let parts = JSONFieldMerge.members(of: local.value),
                  let fields = parts["fields"], let timestamp = parts["timestamp"].flatMap({ Self.clock($0.value) })
            else { return nil }
            self.local = LocalChange(fields: Self.fields(fields.value), timestamp: timestamp)
        }
        if let remote = members["remote"] {
            guard let parts = JSONFieldMerge.members(of: remote.value),
                  let fields = parts["fields"],
                  let version = parts["version"].flatMap({ Self.int($0.value) }),
                  let created = parts["created"].flatMap({ Self.clock($0.value) }),
                  let modified = parts["modified"].flatMap({ Self.clock($0.value) }),
                  let writer = parts["writer"].flatMap({ Self.string($0.value) })
            else { return nil }
            self.remote = StoredRecord(
                id: id, version: version, fields: Self.fields(fields.value), modified: modified, writer: writer,
                created: created)
        }
    }

    private static func fields(_ value: Data) -> Data? {
        value.elementsEqual("null".utf8) ? nil : value
    }

    private static func int(_ value: Data) -> Int? { Int(String(decoding: value, as: UTF8.self)) }

    private static func string(_ value: Data) -> String? {
        (try? JSONSerialization.jsonObject(with: value, options: .fragmentsAllowed)) as? String
    }

    private static func clock(_ value: Data) -> HLCTimestamp? { string(value).flatMap { HLCTimestamp($0) } }
}

/// How a conflict of a pushed local change with the remote's record was settled.
enum PushResolution: Sendable {
    /// Push these fields, based on the remote's current record.
    case save(Data)
    /// Push a deletion, based on the remote's current record.
    case delete
    /// Drop the local change; the remote's record stands.
    case keepRemote
    /// It cannot be settled now; hold the change and report why.
    case hold(MirrorError)
}

/// A pushed local change that conflicted with the remote's record, for a ``Mirror`` of the
/// record type to settle with its conflict policy.
struct PushConflict: Sendable {
    var zone: ZoneID
    var recordID: String
    /// The remote record the local change was made from (the three-way merge's base).
    var base: StoredRecord?
    /// The local change: fields, or `nil` for a deletion.
    var localFields: Data?
    /// When the local change was made.
    var localTimestamp: HLCTimestamp
    /// The remote's record now (a tombstone when deleted there, `nil` when it never existed).
    var current: StoredRecord?
}
