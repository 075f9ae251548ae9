import Foundation
import MagicMirror

/// Requirements 1 to 5: names, fields, versions, conflicts and atomicity.
extension RecordDatabaseConformance {
    static let zone = ZoneID.public("Todo")

    static let namesAndFields: [ConformanceCheck] = [
        ConformanceCheck("invalid names are refused and change nothing", requirement: 1) { subject in
            let db = subject.database
            let badNames = ["", ".", "..", "a/b", "../x", "/etc", "nul\0byte", String(repeating: "x", count: 256)]
            for bad in badNames {
                try await expectMirrorError("record type \(bad.debugDescription)") {
                    try await db.commit([save("r1", ["a": 1])], to: .public(bad))
                }
                let user = try await expectMirrorError("user name \(bad.debugDescription)") {
                    try await db.commit([save("r1", ["a": 1])], to: .private("Todo", user: bad))
                }
                try expectEqual(user.kind, .invalidName, "the kind for user name \(bad.debugDescription)")
                try expect(user.message.contains("user name"), "the message names the user name: \(user.message)")
                let id = try await expectMirrorError("record id \(bad.debugDescription)") {
                    try await db.commit([save(bad, ["a": 1])], to: zone)
                }
                try expectEqual(id.kind, .invalidName, "the kind for record id \(bad.debugDescription)")
                try expect(id.message.contains("record id"), "the message names the record id: \(id.message)")
                try await expectMirrorError("fetchAll in record type \(bad.debugDescription)") {
                    _ = try await db.fetchAll(in: .public(bad))
                }
                try await expectMirrorError("subscribing to record type \(bad.debugDescription)") {
                    _ = try db.subscribe(to: .public(bad)) { _ in }
                }
            }
            // A 255-byte name is the longest valid one.
            let longest = String(repeating: "y", count: 255)
            try await db.commit([save(longest, ["a": 1])], to: .public(longest))
            try expectEqual(
                try await db.fetchAll(in: .public(longest)).records.map(\.id), [longest], "the longest names")
            try expect(try await db.fetchAll(in: zone).records.isEmpty, "a refused commit stored something")
            try expectEqual(try await db.currentToken(in: zone), .initial, "the token after refused commits")
        },
        ConformanceCheck("fields must be a JSON object and come back as saved", requirement: 2) { subject in
            let db = subject.database
            for bad in ["[1,2]", "42", "\"text\"", "{\"a\":", "not json", "{\"a\":1} {\"b\":2}"] {
                let error = try await expectMirrorError("fields \(bad)") {
                    try await db.commit(
                        [.save("r1", fields: Data(bad.utf8), baseVersion: 0, timestamp: now())], to: zone)
                }
                try expectEqual(error.kind, .invalidRecord, "the kind for fields \(bad)")
                try expectEqual(error.recordIDs, ["r1"], "the record ids of the error for fields \(bad)")
            }
            let exact = Data(#"{"title":"Milk \"2%\" ✓","n":1.5,"nested":{"z":[1,null,true]}}"#.utf8)
            try await db.commit([.save("r1", fields: exact, baseVersion: 0, timestamp: now())], to: zone)
            try expectEqual(try await db.fetch(["r1"], in: zone).map(\.fields), [exact], "the fetched bytes")
        },
    ]

    static let versionsAndConflicts: [ConformanceCheck] = [
        ConformanceCheck("versions start at one and grow with every change", requirement: 3) { subject in
            let db = subject.database
            let first = try await db.commit([save("r1", ["v": 1])], to: zone)
            let created = try applied(first.results.first)
            try expectEqual(created.version, 1, "the version of a new record")
            try expectEqual(created.writer, db.writerID, "the writer of a new record")
            try expect(try await db.commit([save("r1", ["v": 2], base: 1)], to: zone).isApplied, "an edit")
            try expectEqual(try await db.fetch(["r1"], in: zone).map(\.version), [2], "the version after an edit")
            let third = try await db.commit([.delete("r1", baseVersion: 2, timestamp: now())], to: zone)
            let tombstone = try applied(third.results.first)
            try expectEqual(tombstone.version, 3, "the version of a tombstone")
            try expect(tombstone.isDeleted, "a deletion returns a tombstone")
            try expect(try await db.fetch(["r1"], in: zone).isEmpty, "a deleted record was fetched")
            let changes = try await db.changes(in: zone, since: first.token)
            try expectEqual(changes.records.map(\.version), [3], "the changes after the creation")
            try expect(changes.records.first?.isDeleted == true, "the change is a tombstone")
            // Re-creating a deleted record is based on the tombstone's version.
            try expect(try await db.commit([save("r1", ["v": 4], base: 3)], to: zone).isApplied, "re-creation")
            try expectEqual(try await db.fetch(["r1"], in: zone).map(\.version), [4], "the re-created version")
        },
        ConformanceCheck("created is the first save's clock, kept by edits and set anew after a delete", requirement: 3) {
            subject in
            let db = subject.database
            let first = save("r1", ["v": 1])
            try await db.commit([first], to: zone)
            let edit = save("r1", ["v": 2], base: 1)
            let edited = try applied(try await db.commit([edit], to: zone).results.first)
            try expectEqual(edited.modified, edit.timestamp, "modified after an edit")
            try expectEqual(edited.created, first.timestamp, "created in the result of an edit")
            try expectEqual(try await db.fetch(["r1"], in: zone).map(\.created), [first.timestamp], "created fetched")
            try expectEqual(
                try await db.changes(in: zone, since: .initial).records.map(\.created), [first.timestamp],
                "created in the changes")
            try expectEqual(
                try await subject.otherWriter().fetch(["r1"], in: zone).map(\.created), [first.timestamp],
                "created seen by another writer")
            // A new generation of the history keeps it.
            try await subject.startNewGeneration(zone)
            try await db.commit([save("r1", ["v": 3], base: 2)], to: zone)
            try expectEqual(
                try await db.fetchAll(in: zone).records.map(\.created), [first.timestamp],
                "created after a new generation and an edit")
            try expectEqual(
                try await subject.otherWriter().fetchAll(in: zone).records.map(\.created), [first.timestamp],
                "created seen by another writer after a new generation")
            // Deleted, then saved again: created anew.
            try await db.commit([.delete("r1", baseVersion: 3, timestamp: now())], to: zone)
            let again = save("r1", ["v": 4], base: 4)
            let recreated = try applied(try await db.commit([again], to: zone).results.first)
            try expectEqual(recreated.created, again.timestamp, "created in the result of a re-creation")
            try expectEqual(
                try await subject.otherWriter().fetch(["r1"], in: zone).map(\.created), [again.timestamp],
                "created of a re-created record seen by another writer")
        },
        ConformanceCheck("stale base versions conflict with the current record", requirement: 4) { subject in
            let db = subject.database
            let other = try await subject.otherWriter()
            try await db.commit([save("r1", ["v": 1])], to: zone)
            try await other.commit([save("r1", ["v": 2], base: 1)], to: zone)
            let stale = try await db.commit([save("r1", ["v": 3], base: 1)], to: zone)
            try expect(!stale.isApplied, "a stale edit was applied")
            let current = try conflict(stale.results.first)
            try expectEqual(current?.version, 2, "the current version in the conflict")
            try expectEqual(current?.writer, other.writerID, "the current writer in the conflict")
            try expectEqual(field("v", of: current?.fields), 2, "the current fields in the conflict")
            // Creating a record that exists conflicts too.
            try expect(!(try await db.commit([save("r1", ["v": 9])], to: zone).isApplied), "a duplicate creation")
            // A deleted record conflicts with an edit based on the version before the delete.
            try await other.commit([.delete("r1", baseVersion: 2, timestamp: now())], to: zone)
            let afterDelete = try await db.commit([save("r1", ["v": 4], base: 2)], to: zone)
            let tombstone = try conflict(afterDelete.results.first)
            try expect(tombstone?.isDeleted == true, "the conflict carries the tombstone")
            try expectEqual(tombstone?.version, 3, "the tombstone's version")
        },
        ConformanceCheck("retrying a stored change is not a conflict", requirement: 4) { subject in
            let db = subject.database
            let operation = save("r1", ["v": 1])
            let first = try await db.commit([operation], to: zone)
            let retry = try await db.commit([operation], to: zone)
            try expect(retry.isApplied, "a retry was refused: \(retry.results)")
            try expectEqual(retry.results, first.results, "the results of a retry")
            try expectEqual(retry.token, first.token, "the token after a retry (stored twice?)")
            try expectEqual(
                try await db.changes(in: zone, since: .initial).records.count, 1, "the records after a retry")
        },
        ConformanceCheck("deleting a record that never existed leaves a tombstone", requirement: 4) { subject in
            let db = subject.database
            let outcome = try await db.commit([.delete("ghost", baseVersion: 0, timestamp: now())], to: zone)
            let tombstone = try applied(outcome.results.first)
            try expect(tombstone.isDeleted, "the result is a tombstone")
            try expectEqual(tombstone.version, 1, "the tombstone's version")
            try expect(try await db.fetchAll(in: zone).records.isEmpty, "a tombstone was listed as live")
        },
    ]

    static let atomicity: [ConformanceCheck] = [
        ConformanceCheck("a commit with one conflict stores nothing", requirement: 5) { subject in
            let db = subject.database
            try await db.commit([save("existing", ["v": 1])], to: zone)
            let before = try await db.currentToken(in: zone)
            let outcome = try await db.commit(
                [save("new1", ["v": 1]), save("existing", ["v": 2], base: 7), save("new2", ["v": 1])], to: zone)
            try expect(!outcome.isApplied, "a commit with a conflict was applied")
            try expectEqual(outcome.results.count, 3, "the number of results")
            try expectEqual(outcome.results[0], .notApplied, "the first result")
            try expectEqual(outcome.results[2], .notApplied, "the third result")
            try expectEqual(try conflict(outcome.results[1])?.version, 1, "the conflicting record's version")
            try expectEqual(try await db.currentToken(in: zone), before, "the token after a refused commit")
            try expectEqual(
                try await db.fetchAll(in: zone).records.map(\.id), ["existing"], "the records after a refused commit")
        },
        ConformanceCheck("a commit naming a record twice is refused", requirement: 5) { subject in
            let db = subject.database
            try await expectMirrorError("a commit naming r1 twice") {
                try await db.commit([save("r1", ["v": 1]), save("r1", ["v": 2])], to: zone)
            }
            try expect(try await db.fetchAll(in: zone).records.isEmpty, "a refused commit stored something")
        },
        ConformanceCheck("a batch is committed whole", requirement: 5) { subject in
            let db = subject.database
            let operations = (0..<500).map { save("r\($0)", ["n": $0]) }
            let outcome = try await db.commit(operations, to: zone)
            try expect(outcome.isApplied, "the batch was not applied")
            let all = try await db.fetchAll(in: zone)
            try expectEqual(Set(all.records.map(\.id)), Set((0..<500).map { "r\($0)" }), "the stored ids")
            try expectEqual(all.records.count, 500, "the number of records")
            try expectEqual(all.token, outcome.token, "the token of fetchAll after the batch")
        },
    ]
}
