import Foundation
import MagicMirror

/// What a commit's `NOTIFY` carries on the `magicmirror` channel: the zone's row number,
/// the token after the commit and the writer, as `zone generation sequence writer`.
///
/// It names no record, record type or user, so a role that listens learns nothing of other
/// roles' private zones but that some zone changed. Listeners pull the changes themselves,
/// through row-level security.
struct NotificationPayload: Hashable, Sendable {
    /// The one channel every database uses.
    static let channel = "magicmirror"

    let zone: Int
    let generation: Int
    let sequence: Int
    let writer: String

    var token: ChangeToken { ChangeToken(generation: generation, sequence: sequence) }

    var text: String { "\(zone) \(generation) \(sequence) \(writer)" }

    init(zone: Int, generation: Int, sequence: Int, writer: String) {
        self.zone = zone
        self.generation = generation
        self.sequence = sequence
        self.writer = writer
    }

    /// Parses a payload; `nil` for anything else sent on the channel.
    init?(_ text: String) {
        let parts = text.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let zone = Int(parts[0]), let generation = Int(parts[1]),
              let sequence = Int(parts[2])
        else { return nil }
        self.init(zone: zone, generation: generation, sequence: sequence, writer: String(parts[3]))
    }
}
