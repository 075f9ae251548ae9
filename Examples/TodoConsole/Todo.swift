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
    /// The JSON form the `--json` output prints.
    var jsonObject: [String: Any] {
        ["id": recordID, "title": title, "done": done, "created": ISO8601DateFormatter().string(from: created)]
    }
}
