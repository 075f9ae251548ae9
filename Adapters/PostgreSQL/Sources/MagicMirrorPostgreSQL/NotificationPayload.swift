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

    /// The tag of change `sequence` to the zone whose notification key is `key`.
    static func tag(key: String, sequence: Int) -> String {
        tagBytes(key: key, sequence: sequence).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// The 16 bytes the tag spells in hexadecimal.
    static func tagBytes(key: String, sequence: Int) -> [UInt8] {
        Array(SHA256.hash(data: Data("\(key) \(sequence)".utf8)).prefix(16))
    }

    /// Tells which notification keys make one payload's tag: each key's digest is computed
    /// once however many listeners of the process hold it (the databases of a relay's users
    /// that all watch one public zone), and compared as bytes. For one payload, on one
    /// thread: the shared listener makes one per notification and hands it to every member.
    final class Matcher {
        let payload: NotificationPayload
        private let tag: [UInt8]?
        private var known: [String: Bool] = [:]

        init(_ payload: NotificationPayload) {
            self.payload = payload
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16)
            var digits = payload.tag.utf8.makeIterator()
            while let high = digits.next(), let low = digits.next() {
                guard let high = Self.value(high), let low = Self.value(low) else { break }
                bytes.append(high << 4 | low)
            }
            tag = bytes.count == 16 ? bytes : nil
        }

        /// Whether the payload is of the zone whose notification key is `key`.
        func isOfZone(withKey key: String) -> Bool {
            guard let tag else { return false }
            if let found = known[key] { return found }
            let found = NotificationPayload.tagBytes(key: key, sequence: payload.sequence) == tag
            known[key] = found
            return found
        }

        private static func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
    }
}
