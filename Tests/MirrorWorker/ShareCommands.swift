import MagicMirror

/// The sharing commands of `mirror-worker mirror` (see MirrorCommand.swift):
/// `share <id> <user> <readOnly|readWrite>`, `revoke <id> <user>`, and `shares`, which
/// prints one `share <id> <owner> <recipient> <access>` line per share in effect.
enum ShareCommands {
    static func apply(_ words: [String], to mirror: Mirror<MirrorCommand.Todo>, output: LineWriter) async throws {
        // `words` is the command, the id and the rest of the line.
        let rest = words.count > 2 ? words[2].split(separator: " ").map(String.init) : []
        switch (words[0], words.count, rest.count) {
        case ("share", 3, 2):
            guard let access = ShareAccess(rawValue: rest[1]) else {
                throw MirrorError(.invalidRecord, "access is readOnly or readWrite, not \(rest[1])")
            }
            try await mirror.share(words[1], with: [try MirrorUser(name: rest[0])], access: access)
        case ("revoke", 3, 1):
            try await mirror.revokeShare(of: words[1], from: [try MirrorUser(name: rest[0])])
        case ("shares", 1, _):
            for share in try await mirror.shares() {
                output.write("share \(share.recordID) \(share.owner) \(share.recipient) \(share.access)")
            }
        default:
            throw MirrorError(
                .invalidRecord,
                "usage: share <id> <user> <readOnly|readWrite> | revoke <id> <user> | shares, not \(words.joined(separator: " "))")
        }
    }
}
