import Foundation

/// Three-way merge of two JSON objects by top-level field, against the version both were
/// made from. Used by the ``ConflictPolicy/changedKeys`` policy.
///
/// Values are compared and copied as their raw bytes, never re-serialised, so numbers,
/// dates and nested objects come out exactly as they went in; fields the record type does
/// not know (written by a newer version of the app) are kept.
package enum JSONFieldMerge {
    /// One top-level member of an object: its key as written (with quotes) and its value.
    package struct Member: Equatable, Sendable {
        package var keyToken: Data
        package var value: Data
    }

    /// Merges `local` and `remote`, both changed from `base`.
    ///
    /// For every field: kept when both sides agree; the local value when only the local side
    /// changed it; the remote value when only the remote side changed it; and when both
    /// changed it differently, the side of the later writer (`localIsLater`). A field
    /// missing on a side counts as that side's value ("absent").
    ///
    /// - Parameter base: The fields both sides started from; `nil` when there is no common
    ///   version (both created the record), which makes every differing field a conflict.
    /// - Returns: The merged object, keys in sorted order; `nil` when any input is not a
    ///   JSON object.
    package static func merge(base: Data?, local: Data, remote: Data, localIsLater: Bool) -> Data? {
        guard let localMembers = members(of: local), let remoteMembers = members(of: remote) else {
            return nil
        }
        let baseMembers: [String: Member]
        if let base {
            guard let parsed = members(of: base) else { return nil }
            baseMembers = parsed
        } else {
            baseMembers = [:]
        }
        var merged: [String: Member] = [:]
        let keys = Set(localMembers.keys).union(remoteMembers.keys).union(baseMembers.keys)
        for key in keys {
            let mine = localMembers[key]
            let theirs = remoteMembers[key]
            let original = baseMembers[key]
            let chosen: Member?
            if mine?.value == theirs?.value {
                chosen = mine ?? theirs
            } else if mine?.value == original?.value {
                chosen = theirs
            } else if theirs?.value == original?.value {
                chosen = mine
            } else {
                chosen = localIsLater ? mine : theirs
            }
            if let chosen { merged[key] = chosen }
        }
        return object(merged)
    }

    /// Writes members as one JSON object, keys in sorted order.
    package static func object(_ members: [String: Member]) -> Data {
        var data = Data("{".utf8)
        for (index, key) in members.keys.sorted().enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            let member = members[key]!
            data.append(member.keyToken)
            data.append(UInt8(ascii: ":"))
            data.append(member.value)
        }
        data.append(UInt8(ascii: "}"))
        return data
    }

    /// The top-level members of a JSON object, by decoded key; `nil` when `data` is not
    /// one well-formed JSON object.
    package static func members(of data: Data) -> [String: Member]? {
        let bytes = [UInt8](data)
        var scanner = Scanner(bytes: bytes)
        return scanner.object()
    }

    /// A small scanner that finds the extent of each top-level value without building it.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func object() -> [String: Member]? {
            skipWhitespace()
            guard consume(UInt8(ascii: "{")) else { return nil }
            var members: [String: Member] = [:]
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return finish(members) }
            while true {
                skipWhitespace()
                let keyStart = position
                guard peek() == UInt8(ascii: "\""), skipString() else { return nil }
                let keyToken = bytes[keyStart..<position]
                guard let key = decodeKey(keyToken) else { return nil }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                let valueStart = position
                guard skipValue(depth: 0) else { return nil }
                members[key] = Member(keyToken: Data(keyToken), value: Data(bytes[valueStart..<position]))
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                guard consume(UInt8(ascii: "}")) else { return nil }
                return finish(members)
            }
        }

        private mutating func finish(_ members: [String: Member]) -> [String: Member]? {
            skipWhitespace()
            return position == bytes.count ? members : nil
        }

        private func decodeKey(_ token: ArraySlice<UInt8>) -> String? {
            let inner = token.dropFirst().dropLast()
            if !inner.contains(UInt8(ascii: "\\")) { return String(decoding: inner, as: UTF8.self) }
            return (try? JSONSerialization.jsonObject(with: Data(token), options: .fragmentsAllowed)) as? String
        }

        private func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

        private mutating func consume(_ byte: UInt8) -> Bool {
            guard peek() == byte else { return false }
            position += 1
            return true
        }

        private mutating func skipWhitespace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                position += 1
            }
        }

        /// Skips a string starting at its opening quote.
        private mutating func skipString() -> Bool {
            guard consume(UInt8(ascii: "\"")) else { return false }
            while let byte = peek() {
                position += 1
                if byte == UInt8(ascii: "\\") {
                    guard peek() != nil else { return false }
                    position += 1
                } else if byte == UInt8(ascii: "\"") {
                    return true
                } else if byte < 0x20 {
                    return false
                }
            }
            return false
        }

        private mutating func skipValue(depth: Int) -> Bool {
            guard depth < 512, let byte = peek() else { return false }
            switch byte {
            case UInt8(ascii: "\""):
                return skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                position += 1
                skipWhitespace()
                if consume(close) { return true }
                while true {
                    skipWhitespace()
                    if byte == UInt8(ascii: "{") {
                        guard peek() == UInt8(ascii: "\""), skipString() else { return false }
                        skipWhitespace()
                        guard consume(UInt8(ascii: ":")) else { return false }
                        skipWhitespace()
                    }
                    guard skipValue(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(close)
                }
            default:
                // A number or a literal: up to the next delimiter.
                let start = position
                while let next = peek(), !Self.delimiters.contains(next) { position += 1 }
                let token = bytes[start..<position]
                if token.elementsEqual("true".utf8) || token.elementsEqual("false".utf8)
                    || token.elementsEqual("null".utf8) { return true }
                return Self.isNumber(token)
            }
        }

        private static let delimiters: Set<UInt8> = [
            UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D,
        ]

        private static func isNumber(_ token: ArraySlice<UInt8>) -> Bool {
            guard !token.isEmpty else { return false }
            let allowed: Set<UInt8> = Set("0123456789+-.eE".utf8)
            return token.allSatisfy { allowed.contains($0) }
                && (token.first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(token.first!))
        }
    }
}
