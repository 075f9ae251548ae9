import Foundation
import MirrorTestSupport
@testable import MagicMirror
import MirrorTesting
import Testing

/// Attacks on how a mirror turns an in-place edit of its array into the records it changed
/// (`ShownRecords.beginEdit`, `lendArray`, `endEdit`): random edits, several in a row on one
/// mirror's records (so each starts from the index state the one before left), mixing every
/// kind of mutation, slices, copies of the lent array, a mutation that throws, ids changed in
/// place and records added under held ids. Each edit must report exactly the records whose
/// value differs between the array before and after it, with their values before and after.
@Suite(.timeLimit(.minutes(5))) struct ShownRecordsEditComparisonTests {
    struct Thrown: Error {}

    /// Few ids and titles, so that ids collide and values come back by chance.
    static let ids = ["a", "b", "c", "d", "e", "f"]

    static func chore(_ generator: inout SplitMix64) -> Chore {
        Chore(id: ids.randomElement(using: &generator)!, title: "t\(Int.random(in: 0..<3, using: &generator))")
    }

    /// One random mutation of `array`, named in `log`.
    static func mutate(_ array: inout RecordArray<Chore>, _ generator: inout SplitMix64, log: inout [String], depth: Int = 0) {
        let count = array.count
        let position = count > 0 ? Int.random(in: 0..<count, using: &generator) : 0
        let title = "t\(Int.random(in: 0..<3, using: &generator))"
        let id = ids.randomElement(using: &generator)!
        let lower = Int.random(in: 0...count, using: &generator)
        let upper = Int.random(in: lower...count, using: &generator)
        switch Int.random(in: 0..<22, using: &generator) {
        case 0 where count > 0:
            log.append("[\(position)].title = \(title)")
            array[position].title = title
        case 1 where count > 0:
            let record = chore(&generator)
            log.append("[\(position)] = \(record.id):\(record.title)")
            array[position] = record
        case 2 where count > 0:
            log.append("[\(position)].id = \(id)")
            array[position].id = id
        case 3:
            let record = chore(&generator)
            log.append("append \(record.id):\(record.title)")
            array.append(record)
        case 4:
            let record = chore(&generator)
            log.append("insert \(record.id):\(record.title) at \(lower)")
            array.insert(record, at: lower)
        case 5 where count > 0:
            log.append("remove at \(position)")
            array.remove(at: position)
        case 6:
            log.append("removeAll where title == \(title)")
            array.removeAll { $0.title == title }
        case 7:
            let added = (0..<Int.random(in: 0...3, using: &generator)).map { _ in chore(&generator) }
            log.append("replaceSubrange \(lower)..<\(upper) with \(added.map { "\($0.id):\($0.title)" })")
            array.replaceSubrange(lower..<upper, with: added)
        case 8 where count > 1:
            let other = Int.random(in: 0..<count, using: &generator)
            log.append("swapAt \(position), \(other)")
            array.swapAt(position, other)
        case 9:
            log.append("sort by title")
            array.sort { ($0.title, $0.id) < ($1.title, $1.id) }
        case 10:
            log.append("reverse")
            array.reverse()
        case 11:
            log.append("[\(lower)..<\(upper)].reverse()")
            array[lower..<upper].reverse()
        case 12:
            log.append("[\(lower)..<\(upper)] sorted by id, descending")
            array[lower..<upper].sort { $0.id > $1.id }
        case 13:
            log.append("[recordID: \(id)]?.title = \(title)")
            array[recordID: id]?.title = title
        case 14:
            let remove = Bool.random(using: &generator)
            log.append("[recordID: \(id)] = \(remove ? "nil" : title)")
            array[recordID: id] = remove ? nil : Chore(id: id, title: title)
        case 15 where depth < 2:
            log.append("copy, mutate the copy {")
            var copy = array
            mutate(&copy, &generator, log: &log, depth: depth + 1)
            if Bool.random(using: &generator) { mutate(&array, &generator, log: &log, depth: depth + 1) }
            log.append("} put the copy back")
            array = copy
        case 16 where depth < 2:
            log.append("copy kept, original mutated, copy mutated, swapped in {")
            var copy = array
            mutate(&array, &generator, log: &log, depth: depth + 1)
            mutate(&copy, &generator, log: &log, depth: depth + 1)
            swap(&array, &copy)
            log.append("}")
        case 17:
            let records = (0..<Int.random(in: 0...4, using: &generator)).map { _ in chore(&generator) }
            log.append("assigned \(records.map { "\($0.id):\($0.title)" })")
            array = RecordArray(records)
        case 18:
            log.append("removeAll")
            array.removeAll(keepingCapacity: Bool.random(using: &generator))
        case 19:
            let added = (0..<Int.random(in: 0...3, using: &generator)).map { _ in chore(&generator) }
            log.append("append(contentsOf: \(added.map { "\($0.id):\($0.title)" }))")
            array.append(contentsOf: added)
        case 20 where count > 0:
            log.append("[\(position)].title = \(title), then throws")
            func change(_ record: inout Chore) throws {
                record.title = title
                throw Thrown()
            }
            try? change(&array[position])
        case 21 where count > 0:
            log.append("[\(position)].id = \(id) and title = \(title) in one access")
            modify(&array[position]) {
                $0.id = id
                $0.title = title
            }
        default:
            log.append("reserveCapacity")
            array.reserveCapacity(count + 4)
        }
    }

    static func modify(_ record: inout Chore, _ change: (inout Chore) -> Void) { change(&record) }

    /// Many random edits, several in a row on each mirror's records: each reports exactly
    /// the records whose value changed, with the right values, and leaves one record per id.
    @Test(arguments: 0..<8)
    func randomEditsReportExactlyTheRecordsTheyChanged(batch: Int) {
        var failures = 0
        for seed in (batch * 250)..<((batch + 1) * 250) where failures < 3 {
            var generator = SplitMix64(seed: UInt64(seed))
            var records = ShownRecords<Chore>()
            records.load((0..<Int.random(in: 0...5, using: &generator)).map { Chore(id: Self.ids[$0], title: "t0") })
            for edit in 0..<6 {
                let before = records.array.array
                var log: [String] = []
                let number = records.beginEdit()
                var lent = records.lendArray()
                for _ in 0..<Int.random(in: 1...5, using: &generator) { Self.mutate(&lent, &generator, log: &log) }
                let changes = records.endEdit(number, returning: lent)
                let after = records.array.array
                let context = "seed \(seed), edit \(edit): \(before) then \(log) gave \(after), reported \(changes.map { "\($0.id): \(String(describing: $0.old)) -> \(String(describing: $0.new))" })"
                guard Self.check(before: before, after: after, changes: changes, shown: &records, context) else {
                    failures += 1
                    break
                }
            }
        }
    }

    /// The same random edits through a mirror (`dataModel`'s in-place edit, several mutations
    /// in one access), with another writer's new records arriving between them: once flushed,
    /// the database stores exactly the records the mirror shows, and the mirror shows exactly
    /// what the database stores.
    @Test(arguments: 0..<3)
    func randomEditsThroughAMirrorAreStoredExactly(batch: Int) async throws {
        for seed in (batch * 20)..<((batch + 1) * 20) {
            var generator = SplitMix64(seed: UInt64(1_000 + seed))
            let database = InMemoryDatabase()
            let mirror = try await Mirror<Chore>(database: database)
            var log: [String] = []
            func edit(_ array: inout RecordArray<Chore>, _ generator: inout SplitMix64) {
                for _ in 0..<Int.random(in: 1...5, using: &generator) { Self.mutate(&array, &generator, log: &log) }
            }
            for step in 0..<8 {
                edit(&mirror.dataModel, &generator)
                log.append("| ")
                if Bool.random(using: &generator) {
                    try await database.simulateSave(Chore(id: "remote\(step)", title: "r"))
                }
            }
            try await mirror.flush()
            let stored = try await storedRecords(Chore.self, in: database)
            let shown = try await mirror.waitUntil(timeout: .seconds(120), "seed \(seed): the records stored") { array in
                Set(array.map(\.id)).count == array.count
                    && Dictionary(uniqueKeysWithValues: array.map { ($0.id, $0) }) == stored
            }
            #expect(shown.count == stored.count, "seed \(seed): \(log)")
        }
    }

    /// Whether `changes` are exactly the difference between `before` and `after` (recording
    /// an issue when not).
    static func check(
        before: [Chore], after: [Chore], changes: [ShownRecords<Chore>.Change], shown: inout ShownRecords<Chore>,
        _ context: String
    ) -> Bool {
        let afterIDs = after.map(\.id)
        guard Set(afterIDs).count == afterIDs.count else {
            Issue.record("one record per id: \(context)")
            return false
        }
        let old = Dictionary(uniqueKeysWithValues: before.map { ($0.id, $0) })
        let new = Dictionary(uniqueKeysWithValues: after.map { ($0.id, $0) })
        let expected = Set(old.keys).union(new.keys).filter { old[$0] != new[$0] }
        let reported = changes.map(\.id)
        guard Set(reported).count == reported.count, Set(reported) == expected else {
            Issue.record("changed ids \(reported.sorted()), expected \(expected.sorted()): \(context)")
            return false
        }
        for change in changes where change.old != old[change.id] || change.new != new[change.id] || shown[change.id] != change.new {
            Issue.record("\(change.id): reported \(String(describing: change.old)) -> \(String(describing: change.new)): \(context)")
            return false
        }
        return true
    }
}
