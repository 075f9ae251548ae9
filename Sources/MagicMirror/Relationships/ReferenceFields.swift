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
    package static func targets(in fields: Data, field: String, targetType: String) -> [String] {
        guard let value = JSONFieldMerge.members(of: fields)?[field]?.value else { return [] }
        return targets(inValue: value, targetType: targetType)
    }

    /// The target ids of one field's value.
    private static func targets(inValue value: Data, targetType: String) -> [String] {
        guard let parsed = try? JSONSerialization.jsonObject(with: value, options: [.fragmentsAllowed]) else {
            return []
        }
        if let array = parsed as? [Any] {
            return array.compactMap { target(of: $0, targetType: targetType) }
        }
        return target(of: parsed, targetType: targetType).map { [$0] } ?? []
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
