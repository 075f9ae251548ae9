import Foundation

/// One share as a store that keeps shares as records keeps it: a record of the recipient's
/// shared zone, whose id is the shared record's id and whose fields say whose record it is,
/// what the recipient may do, and which incarnation of the record was shared (its creation
/// clock).
///
/// ```json
/// {"access":"readWrite","created":"1763703120123-0","owner":"alice"}
/// ```
package struct ShareGrant: Codable, Hashable, Sendable {
    /// The user whose private record is shared.
    package var owner: MirrorUser
    /// What the recipient may do.
    package var access: ShareAccess
    /// The shared record's ``StoredRecord/created`` when it was shared: a record deleted and
    /// created again is another record, not shared.
    package var created: HLCTimestamp

    package init(owner: MirrorUser, access: ShareAccess, created: HLCTimestamp) {
        self.owner = owner
        self.access = access
        self.created = created
    }

    /// The grant's fields, a JSON object.
    package func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // A struct of a user name, an enum and a timestamp always encodes.
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }

    /// The grant a stored record of a shared zone holds, or `nil` for a tombstone or fields
    /// that are not a valid grant (a hostile owner name included), which grant nothing.
    package init?(_ record: StoredRecord) {
        guard let fields = record.fields, let grant = try? JSONDecoder().decode(Self.self, from: fields) else {
            return nil
        }
        self = grant
    }
}
