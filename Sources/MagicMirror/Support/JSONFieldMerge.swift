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
        let sorted = members.sorted { $0.key < $1.key }
        var size = 1 + max(sorted.count, 1)
        for (_, member) in sorted { size += member.keyToken.count + 1 + member.value.count }
        var data = Data(capacity: size)
        data.append(UInt8(ascii: "{"))
        for (index, (_, member)) in sorted.enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(member.keyToken)
            data.append(UInt8(ascii: ":"))
            data.append(member.value)
        }
        data.append(UInt8(ascii: "}"))
        return data
    }

    /// The top-level members of a JSON object, by decoded key; `nil` when `data` is not
    /// one well-formed JSON object (as strict as ``JSONScanner``). A key that appears twice
    /// keeps its last value.
    package static func members(of data: Data) -> [String: Member]? {
        data.withUnsafeBytes { raw -> [String: Member]? in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var scanner = JSONScanner(base: base, count: raw.count)
            var members: [String: Member] = [:]
            let isObject = scanner.scanObject { key, keyToken, scanner in
                let valueStart = scanner.position
                guard scanner.skipValue() else { return false }
                members[key] = Member(
                    keyToken: Data(bytes: base + keyToken.lowerBound, count: keyToken.count),
                    value: Data(bytes: base + valueStart, count: scanner.position - valueStart))
                return true
            }
            guard isObject else { return nil }
            scanner.skipWhitespace()
            return scanner.isAtEnd ? members : nil
        }
    }
}
