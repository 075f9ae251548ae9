import Foundation

/// Reads and rewrites the reference fields of stored records (their JSON bytes): the one
/// place that knows a ``Reference``'s stored shape, `{"recordType":…,"recordID":…}`.
///
/// Anything that is not a well-formed reference to the rule's target type (another shape, a
/// record type that is not the target, an id that breaks the name rules) is not a reference:
/// it is never followed nor changed.
package enum ReferenceFields {
    /// The ids of the targets that `fields`'s `rule.field` refers to (a to-one reference or
    /// an array of them), in order.
    ///
    /// Read in one pass over the bytes with ``JSONScanner`` (a cascade reads every record of
    /// the referring zone): nothing but the ids is built. Invalid JSON has no targets.
    package static func targets(in fields: Data, field: String, targetType: String) -> [String] {
        fields.withUnsafeBytes { raw -> [String] in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return [] }
            var scanner = JSONScanner(base: base, count: raw.count)
            // The field's value, the last one when the key is repeated.
            var valueStart: Int?
            let isObject = scanner.scanObject { key, _, scanner in
                if key == field { valueStart = scanner.position }
                return scanner.skipValue()
            }
            guard isObject else { return [] }
            scanner.skipWhitespace()
            guard scanner.isAtEnd, let valueStart else { return [] }
            scanner.position = valueStart
            return targets(&scanner, targetType: targetType) ?? []
        }
    }

    /// The target ids of the (valid) value at the scanner: one reference or an array of them.
    private static func targets(_ scanner: inout JSONScanner, targetType: String) -> [String]? {
        guard scanner.peek == UInt8(ascii: "[") else {
            return target(&scanner, targetType: targetType).map { $0.map { [$0] } ?? [] }
        }
        scanner.position += 1
        var ids: [String] = []
        if scanner.consume(UInt8(ascii: "]")) { return ids }
        while true {
            scanner.skipWhitespace()
            guard let id = target(&scanner, targetType: targetType) else { return nil }
            if let id { ids.append(id) }
            if scanner.consume(UInt8(ascii: ",")) { continue }
            return scanner.consume(UInt8(ascii: "]")) ? ids : nil
        }
    }

    /// Reads one value: `.some(id)` when it is a reference to `targetType` with a valid id,
    /// `.some(nil)` for any other valid value, `nil` when it is not valid JSON.
    private static func target(_ scanner: inout JSONScanner, targetType: String) -> String?? {
        guard scanner.peek == UInt8(ascii: "{") else { return scanner.skipValue() ? .some(nil) : nil }
        var type: String?
        var id: String?
        let isObject = scanner.scanObject { key, _, scanner in
            let isType = key == "recordType"
            guard isType || key == "recordID" else { return scanner.skipValue() }
            // A later member of the same name wins, whatever its kind.
            var string: String?
            if scanner.peek == UInt8(ascii: "\"") {
                guard let read = scanner.readString() else { return false }
                string = read
            } else if !scanner.skipValue() {
                return false
            }
            if isType { type = string } else { id = string }
            return true
        }
        guard isObject else { return nil }
        guard let type, type.utf8.elementsEqual(targetType.utf8), let id, NameRules.problem(with: id) == nil else {
            return .some(nil)
        }
        return .some(id)
    }

    private static func target(of value: Any, targetType: String) -> String? {
        guard let object = value as? [String: Any],
              let type = object["recordType"] as? String, type.utf8.elementsEqual(targetType.utf8),
              let id = object["recordID"] as? String, NameRules.problem(with: id) == nil
        else { return nil }
        return id
    }

    /// `fields` with the references to `removed` taken out of `field`: a to-one reference
    /// becomes `null`, an array loses those elements; `nil` when nothing changes.
    package static func removing(
        _ removed: IDSet, from fields: Data, field: String, targetType: String
    ) -> Data? {
        guard var members = JSONFieldMerge.members(of: fields), let member = members[field],
              let parsed = try? JSONSerialization.jsonObject(with: member.value, options: [.fragmentsAllowed])
        else { return nil }
        let newValue: Data
        if let array = parsed as? [Any] {
            let kept = array.filter { element in
                guard let id = target(of: element, targetType: targetType) else { return true }
                return !removed.contains(id)
            }
            guard kept.count < array.count,
                  let data = try? JSONSerialization.data(withJSONObject: kept, options: [.sortedKeys])
            else { return nil }
            newValue = data
        } else {
            guard let id = target(of: parsed, targetType: targetType), removed.contains(id) else { return nil }
            newValue = Data("null".utf8)
        }
        members[field] = JSONFieldMerge.Member(keyToken: member.keyToken, value: newValue)
        return JSONFieldMerge.object(members)
    }
}
