#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror

/// How `mirror-db` writes zones, records, dates and bytes, as text and as JSON.
enum Output {
    /// `public/Todo`, `private/alice/Todo` or `shared/bob/Todo`, as in the database's
    /// directory.
    static func name(_ zone: ZoneID) -> String { "\(zone)" }

    /// `1 record`, `2 records`: a count and its noun, singular for one.
    static func count(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }

    static func zoneObject(_ zone: ZoneID) -> [String: Any] {
        var object: [String: Any] = ["scope": zone.scope.rawValue, "recordType": zone.recordType]
        if let user = zone.user { object["user"] = user }
        return object
    }

    // MARK: Dates

    private static let iso8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// A clock reading (milliseconds since 1970) in UTC.
    static func date(_ clock: HLCTimestamp) -> String {
        iso8601.format(Date(timeIntervalSince1970: Double(clock.millis) / 1000))
    }

    /// Whether a field holds a date, by its name: what a reader calls a date.
    static func looksLikeDate(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return ["date", "time", "created", "modified", "updated", "deadline", "due"].contains { lowered.contains($0) }
            || (key.hasSuffix("At") && key.count > 2)
    }

    /// A `Date` as Foundation's `JSONEncoder` writes it by default (seconds since
    /// 2001-01-01), when the number is one (years 1970 to 2100).
    static func dateText(_ number: Double) -> String? {
        guard number > -978_307_200, number < 3_155_760_000 else { return nil }
        return iso8601.format(Date(timeIntervalSinceReferenceDate: number))
    }

    // MARK: Fields

    /// A JSON value, decoded with booleans told apart from numbers.
    enum Value: Decodable {
        case null, bool(Bool), number(Double), string(String), array([Value]), object([String: Value])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([Value].self) {
                self = .array(value)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        /// The value written compactly; dates under `key` shown as dates.
        func text(key: String? = nil) -> String {
            switch self {
            case .null: return "null"
            case .bool(let value): return value ? "true" : "false"
            case .number(let value):
                if let key, Output.looksLikeDate(key), let date = Output.dateText(value) { return date }
                return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            case .string(let value): return Output.quoted(value)
            case .array(let values): return "[" + values.map { $0.text() }.joined(separator: ", ") + "]"
            case .object(let fields):
                return "{" + fields.keys.sorted().map { "\($0): \(fields[$0]!.text(key: $0))" }.joined(separator: ", ") + "}"
            }
        }
    }

    static func fields(_ data: Data?) -> [String: Value]? {
        guard let data, case .object(let fields)? = try? JSONDecoder().decode(Value.self, from: data) else { return nil }
        return fields
    }

    /// `title: "Milk", done: false, created: 2026-11-23T08:11:45.000Z`, keys sorted.
    static func fieldsText(_ data: Data?) -> String {
        guard let fields = fields(data) else { return data.map { escaped($0) } ?? "(deleted)" }
        if fields.isEmpty { return "(no fields)" }
        return fields.keys.sorted().map { "\($0): \(fields[$0]!.text(key: $0))" }.joined(separator: ", ")
    }

    /// The fields' dates, by key, for the JSON output.
    static func dates(_ data: Data?) -> [String: String] {
        var dates: [String: String] = [:]
        for (key, value) in fields(data) ?? [:] {
            if case .number(let number) = value, looksLikeDate(key), let text = dateText(number) { dates[key] = text }
        }
        return dates
    }

    static func recordObject(_ record: StoredRecord) -> [String: Any] {
        var object = changeObject(record)
        object["created"] = date(record.created)
        return object
    }

    static func changeObject(_ record: StoredRecord) -> [String: Any] {
        var object: [String: Any] = [
            "id": record.id, "version": record.version, "modified": date(record.modified), "writer": record.writer,
            "op": record.isDeleted ? "delete" : "save",
        ]
        if let data = record.fields, let fields = try? JSONSerialization.jsonObject(with: data) {
            object["fields"] = fields
            let dates = dates(data)
            if !dates.isEmpty { object["fieldDates"] = dates }
        }
        return object
    }

    // MARK: Text

    /// A string in double quotes, with control characters escaped so that a title cannot
    /// move the cursor, change colours or split a line.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    result += String(format: "\\u{%02X}", scalar.value)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }

    /// Bytes as text, with control characters and invalid UTF-8 escaped.
    static func escaped(_ bytes: Data) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        let quoted = quoted(text)
        return String(quoted.dropFirst().dropLast())
    }

    static func bytes(_ count: Int) -> String {
        count < 1024 ? "\(count) B"
            : count < 1 << 20 ? String(format: "%.1f KiB", Double(count) / 1024)
            : String(format: "%.1f MiB", Double(count) / Double(1 << 20))
    }

    static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Why recovery set the bytes aside, from the file's name.
    static func quarantineReason(_ name: String) -> String {
        if name.hasSuffix(".torn") { return "an unfinished write cut from the end of a journal" }
        if name.hasPrefix("quarantine-snapshot-") { return "a snapshot line that does not decode" }
        return "a journal line that does not decode, or a commit with a repeated sequence number"
    }

    static func printJSON(_ value: Any) {
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return
        }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

/// One line of progress on standard error, rewritten in place; only when standard error is
/// a terminal, so that logs and pipes get none.
enum Progress {
    static let isTerminal = isatty(STDERR_FILENO) == 1

    static func show(_ text: String) {
        guard isTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K\(text)".utf8))
    }

    static func clear() {
        guard isTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
