import Crypto
import Foundation
import MagicMirror

/// What a commit's `NOTIFY` carries on the `magicmirror` channel: `sequence tag`, the
/// change's number and a tag that only the readers of its zone can recognise.
///
/// The tag is the first 32 hexadecimal digits of SHA-256 of `"<key> <sequence>"`, where
/// the key is the zone's `notify_key`, a random value stored in its row (the server makes
/// both: `magicmirror.notification(key, seq)`). A role that can read the zone's row knows
/// the key and tells its notifications apart; any other role sees a sequence number (which
/// `change_seq` gives every role anyway) and a tag that changes with every notification, so
/// it learns that some zone changed, not which, whose, or whether it is the same zone as
/// before. Listeners pull the changes themselves, through row-level security.
struct NotificationPayload: Hashable, Sendable {
    /// The one channel every database uses.
    static let channel = "magicmirror"

    let sequence: Int
    let tag: String

    var text: String { "\(sequence) \(tag)" }

    init(sequence: Int, tag: String) {
        self.sequence = sequence
        self.tag = tag
    }

    /// The payload of change `sequence` to the zone whose notification key is `key`.
    init(sequence: Int, key: String) {
        self.init(sequence: sequence, tag: Self.tag(key: key, sequence: sequence))
    }

    /// Parses a payload; `nil` for anything else sent on the channel.
    init?(_ text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, let sequence = Int(parts[0]), parts[1].utf8.count == 32 else { return nil }
        self.init(sequence: sequence, tag: String(parts[1]))
    }

    /// Whether the payload is of the zone whose notification key is `key`.
    func isOfZone(withKey key: String) -> Bool {
        tag == Self.tag(key: key, sequence: sequence)
    }

    /// The tag of change `sequence` to the zone whose notification key is `key`.
    static func tag(key: String, sequence: Int) -> String {
        let digest = SHA256.hash(data: Data("\(key) \(sequence)".utf8))
        return digest.prefix(16).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
