import Foundation
import MagicMirror

/// Requirement 7 (tokens and change sets), and zones kept apart.
extension RecordDatabaseConformance {
    static let tokens: [ConformanceCheck] = [
        ConformanceCheck("changes since a token are the latest state of each changed record", requirement: 7) {
            subject in
            let db = subject.database
            try expectEqual(try await db.currentToken(in: zone), .initial, "the token of an empty zone")
            let a = try await db.commit([save("a", ["v": 1]), save("b", ["v": 1])], to: zone)
            try expect(a.token > .initial, "the first commit did not move the token: \(a.token)")
            let b = try await db.commit([save("a", ["v": 2], base: 1)], to: zone)
            try expect(b.token > a.token, "the second commit did not move the token: \(b.token)")
            let c = try await db.commit([save("a", ["v": 3], base: 2), save("c", ["v": 1])], to: zone)
            try expectEqual(try await db.currentToken(in: zone), c.token, "the current token")

            let sinceA = try await db.changes(in: zone, since: a.token)
            try expect(!sinceA.isComplete, "changes since a current token were complete")
            try expectEqual(sinceA.token, c.token, "the token of the changes")
            try expectEqual(sinceA.records.map(\.id).sorted(), ["a", "c"], "the changed ids")
            try expectEqual(sinceA.records.first { $0.id == "a" }?.version, 3, "the latest version of a")

            let sinceLatest = try await db.changes(in: zone, since: c.token)
            try expect(sinceLatest.records.isEmpty, "changes since the latest token: \(sinceLatest.records)")
            try expect(!sinceLatest.isComplete, "changes since the latest token were complete")
            try expectEqual(
                try await db.changes(in: zone, since: .initial).records.count, 3, "the changes from the start")
        },
        ConformanceCheck("applying change sets reproduces the zone", requirement: 7) { subject in
            let db = subject.database
            var mirror: [String: StoredRecord] = [:]
            var token = ChangeToken.initial
            var versions: [String: Int] = [:]
            var generator = SystemRandomNumberGenerator()
            for step in 0..<60 {
                let id = "r\(Int.random(in: 0..<8, using: &generator))"
                let base = versions[id] ?? 0
                let deleting = base > 0 && Bool.random(using: &generator)
                let operation: RecordOperation = deleting
                    ? .delete(id, baseVersion: base, timestamp: now())
                    : save(id, ["step": step], base: base)
                let outcome = try await db.commit([operation], to: zone)
                if case .applied(let record) = outcome.results[0] { versions[id] = record.version }
                if step % 7 == 0 {
                    let changes = try await db.changes(in: zone, since: token)
                    if changes.isComplete { mirror = [:] }
                    for record in changes.records { mirror[record.id] = record.isDeleted ? nil : record }
                    token = changes.token
                }
            }
            let changes = try await db.changes(in: zone, since: token)
            for record in changes.records { mirror[record.id] = record.isDeleted ? nil : record }
            let all = try await db.fetchAll(in: zone)
            try expect(all.isComplete, "fetchAll is not complete")
            try expectEqual(
                Dictionary(uniqueKeysWithValues: all.records.map { ($0.id, $0) }), mirror, "the reproduced zone")
        },
        ConformanceCheck("an older generation token gets the complete zone", requirement: 7) { subject in
            let db = subject.database
            let first = try await db.commit([save("keep", ["v": 1]), save("gone", ["v": 1])], to: zone)
            try await db.commit([.delete("gone", baseVersion: 1, timestamp: now())], to: zone)
            try await subject.startNewGeneration(zone)
            let renewed = try await db.currentToken(in: zone)
            try expect(
                renewed.generation > first.token.generation,
                "the generation did not grow: \(first.token) then \(renewed)")
            let changes = try await db.changes(in: zone, since: first.token)
            try expect(changes.isComplete, "changes since an old-generation token were not complete")
            try expectEqual(changes.records.map(\.id), ["keep"], "the complete zone")
            try expectEqual(changes.token, renewed, "the token of the complete zone")
            // A token from the future is treated the same way.
            let future = ChangeToken(generation: renewed.generation, sequence: renewed.sequence + 100)
            try expect(try await db.changes(in: zone, since: future).isComplete, "a future token was trusted")
            // Writing continues in the new generation.
            let next = try await db.commit([save("new", ["v": 1])], to: zone)
            let incremental = try await db.changes(in: zone, since: renewed)
            try expect(!incremental.isComplete, "changes in the new generation were complete")
            try expectEqual(incremental.records.map(\.id), ["new"], "the changes in the new generation")
            try expectEqual(incremental.token, next.token, "the token in the new generation")
        },
        ConformanceCheck("zones are independent", requirement: nil) { subject in
            let db = subject.database
            try await db.commit([save("p", ["v": 1])], to: .public("Todo"))
            try await db.commit([save("a", ["v": 1])], to: .private("Todo", user: "alice"))
            try await db.commit([save("b", ["v": 1])], to: .private("Todo", user: "bob"))
            try await db.commit([save("n", ["v": 1])], to: .public("Note"))
            try expectEqual(try await db.fetchAll(in: .public("Todo")).records.map(\.id), ["p"], "public Todo")
            try expectEqual(
                try await db.fetchAll(in: .private("Todo", user: "alice")).records.map(\.id), ["a"], "alice's Todo")
            try expectEqual(
                try await db.fetchAll(in: .private("Todo", user: "bob")).records.map(\.id), ["b"], "bob's Todo")
            try expectEqual(try await db.fetchAll(in: .public("Note")).records.map(\.id), ["n"], "public Note")
            try expectEqual(
                try await db.fetch(["p", "a"], in: .public("Todo")).map(\.id), ["p"], "fetching across zones")
        },
    ]
}
