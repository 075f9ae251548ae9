import Foundation
import MagicMirror

/// Requirement 1, ids are bytes: canonically equivalent spellings are distinct records, and
/// names that become directories are in NFC.
extension RecordDatabaseConformance {
    /// `é` as one code point and as `e` with a combining accent: equal as Swift strings,
    /// different bytes.
    static let composed = "caf\u{e9}"
    static let decomposed = "cafe\u{301}"

    static let idsAreBytes: [ConformanceCheck] = [
        ConformanceCheck("ids that differ only in Unicode normalisation are two records", requirement: 1) { subject in
            let db = subject.database
            try expect(composed == decomposed && !composed.utf8.elementsEqual(decomposed.utf8), "the test ids")
            let first = try await db.commit([save(decomposed, ["form": "decomposed"])], to: zone)
            try expect(first.isApplied, "the decomposed id is stored")
            // A new record, not an edit of the first: based on version 0, it must not conflict.
            let second = try await db.commit([save(composed, ["form": "composed"])], to: zone)
            try expect(second.isApplied, "the composed id is a record of its own, not a conflict with the other")
            // One commit may name both.
            let both = try await db.commit(
                [save(composed, ["form": "composed 2"], base: 1), save(decomposed, ["form": "decomposed 2"], base: 1)],
                to: zone)
            try expect(both.isApplied, "one commit names both ids")

            for reader in [db, try await subject.otherWriter()] {
                let all = try await reader.fetchAll(in: zone).records
                try expectEqual(all.count, 2, "the number of records")
                for (id, form) in [(composed, "composed 2"), (decomposed, "decomposed 2")] {
                    let stored = try await reader.fetch([id], in: zone)
                    try expectEqual(stored.count, 1, "the records fetched for one spelling")
                    try expect(stored[0].id.utf8.elementsEqual(id.utf8), "the fetched id keeps its bytes")
                    let fields = try JSONSerialization.jsonObject(with: stored[0].fields ?? Data()) as? [String: Any]
                    try expectEqual(fields?["form"] as? String, form, "the fields of \(form)")
                    try expectEqual(stored[0].version, 2, "the version of \(form)")
                }
                let changes = try await reader.changes(in: zone, since: .initial).records
                try expectEqual(changes.count, 2, "the changes list both records")
            }
            // Deleting one leaves the other.
            try await db.commit([.delete(composed, baseVersion: 2, timestamp: now())], to: zone)
            let left = try await db.fetchAll(in: zone).records
            try expectEqual(left.count, 1, "the records after deleting one spelling")
            try expect(left.first?.id.utf8.elementsEqual(decomposed.utf8) == true, "the other spelling stays")
        },
        ConformanceCheck("record types and user names must be in Unicode NFC", requirement: 1) { subject in
            let db = subject.database
            let type = try await expectMirrorError("a decomposed record type") {
                try await db.commit([save("r1", ["a": 1])], to: .public(decomposed))
            }
            try expectEqual(type.kind, .invalidName, "the kind for a decomposed record type")
            let user = try await expectMirrorError("a decomposed user name") {
                try await db.commit([save("r1", ["a": 1])], to: .private("Todo", user: decomposed))
            }
            try expectEqual(user.kind, .invalidName, "the kind for a decomposed user name")
            try await db.commit([save("r1", ["a": 1])], to: .public(composed))
            try await db.commit([save("r1", ["a": 1])], to: .private(composed, user: composed))
            try expectEqual(try await db.fetchAll(in: .public(composed)).records.count, 1, "an NFC record type")
        },
    ]
}
