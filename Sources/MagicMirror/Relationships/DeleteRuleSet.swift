/// The rules of one scope space, as databases keep them: checked, and replaced one
/// referring type at a time.
package enum DeleteRuleSet {
    /// Checks the rules a type declares: each one valid and declared by `referringType`,
    /// and at most one rule per field.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` or ``MirrorError/Kind/invalidRecord``
    ///   naming the rule.
    package static func check(_ rules: [StoredDeleteRule], referringType: String) throws(MirrorError) {
        try MirrorError.beforeStoring { () throws(MirrorError) in
            try NameRules.check(referringType, as: "record type")
            var fields = Set<String>()
            for rule in rules {
                try rule.validate()
                guard rule.referringType.utf8.elementsEqual(referringType.utf8) else {
                    throw MirrorError(
                        .invalidRecord, "the delete rule \(rule) is not a rule of \(referringType)",
                        recordType: referringType)
                }
                guard fields.insert(rule.field).inserted else {
                    throw MirrorError(
                        .invalidRecord,
                        "\(referringType) declares two delete rules for its field \"\(rule.field)\"; keep one",
                        recordType: referringType)
                }
            }
        }
    }

    /// `existing` with the rules of `referringType` replaced by `rules`, sorted.
    package static func replacing(
        _ existing: [StoredDeleteRule], of referringType: String, with rules: [StoredDeleteRule]
    ) -> [StoredDeleteRule] {
        (existing.filter { !$0.referringType.utf8.elementsEqual(referringType.utf8) } + rules)
            .sorted { ($0.referringType, $0.field) < ($1.referringType, $1.field) }
    }
}
