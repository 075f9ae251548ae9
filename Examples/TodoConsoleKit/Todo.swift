import Foundation
import MagicMirror

/// One item of the shared to-do list.
struct Todo: Recordable {
    static let recordType = "Todo"

    var id = UUID()
    var title: String
    var done = false
    var created = Date()
}

extension Todo {
    /// The order `list` numbers items in: oldest first, then by id.
    static func numbered(_ todos: [Todo]) -> [Todo] {
        todos.sorted { ($0.created, $0.recordID) < ($1.created, $1.recordID) }
    }

    /// The JSON object every `--json` output prints for an item (`list`, `watch`, `add`,
    /// `done`, …): `number`, `id`, `title`, `done`, `created`.
    func jsonObject(number: Int) -> [String: Any] {
        [
            "number": number, "id": recordID, "title": title, "done": done,
            "created": ISO8601DateFormatter().string(from: created),
        ]
    }

    /// The line `list` and `watch` print for an item, its title made safe for a terminal.
    func line(number: Int, width: Int = 1) -> String {
        "\(String(number).leftPadded(to: width)). [\(done ? "x" : " ")] \(title.terminalSafe)  (\(recordID))"
    }
}

extension String {
    /// The string with every character that could move the cursor, change colours or split
    /// a line (control characters, escape sequences, line and paragraph separators,
    /// bidirectional overrides) written as a visible escape: `\n`, `\t`, `\r`, `\u{1B}`.
    var terminalSafe: String {
        var safe = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\n": safe += "\\n"
            case "\t": safe += "\\t"
            case "\r": safe += "\\r"
            case _ where Self.isUnsafe(scalar):
                safe += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: safe.unicodeScalars.append(scalar)
            }
        }
        return safe
    }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        case .format:
            // Bidirectional embeddings, overrides and isolates reorder what follows.
            return (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
        default: return false
        }
    }

    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
