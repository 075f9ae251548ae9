import Foundation
import MirrorTestSupport
import Synchronization
import Testing

@testable import MagicMirror

/// Review of the inotify hub, the kept key orders of DirectJSONEncoder and packed decoding.
@Suite(.timeLimit(.minutes(5))) struct Review9Tests {
    // MARK: Directory watching

    #if canImport(Glibc)
    /// A watched directory deleted while the process's inotify queue overflows (its
    /// deletion read in the same batch as the overflow, or lost in it) falls back to
    /// polling, and is noticed when it comes back.
    @Test(arguments: ["before", "after"])
    func aDirectoryDeletedAroundAnOverflowIsNoticedWhenItComesBack(_ when: String) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let result = try await MirrorWorkerRun.run(["watcher-overflow-deleted", temporary.path, when])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "polling noticed")
    }

    /// Watchers sharing one watch, cancelled one by one while the directory keeps changing:
    /// after `cancel()` returns, the handler of the cancelled watcher is not running and
    /// is not called again, and the others still hear of the changes.
    @Test func noHandlerRunsAfterCancelWhileASharedWatchIsBusy() async throws {
        final class Watch: Sendable {
            struct State { var cancelled = Set<Int>(); var running = [Int: Int](); var late = 0; var heard = 0 }
            let state = Mutex(State())
        }
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = temporary.path + "/Busy"
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        let count = 24
        let watch = Watch()
        var watchers: [DirectoryWatcher] = []
        for index in 0..<count {
            let watcher = DirectoryWatcher(method: .native) { _ in
                watch.state.withLock { state in
                    state.running[index, default: 0] += 1
                    state.heard += 1
                    if state.cancelled.contains(index) { state.late += 1 }
                }
                usleep(200)
                watch.state.withLock { state in
                    if state.cancelled.contains(index) { state.late += 1 }
                    state.running[index, default: 0] -= 1
                }
            }
            try watcher.add(zone)
            watchers.append(watcher)
        }
        let stop = Atomic<Bool>(false)
        let writer = Thread {
            var round = 0
            while !stop.load(ordering: .relaxed) {
                round += 1
                _ = FileManager.default.createFile(atPath: zone + "/f\(round % 5)", contents: Data("\(round)".utf8))
                usleep(100)
            }
        }
        writer.start()
        for index in 0..<count {
            try await Task.sleep(for: .milliseconds(20))
            if index % 3 == 0 { watchers[index].remove(zone) }
            watchers[index].cancel()
            watch.state.withLock { state in
                #expect(state.running[index, default: 0] == 0, "watcher \(index)")
                state.cancelled.insert(index)
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        stop.store(true, ordering: .relaxed)
        watch.state.withLock { state in
            #expect(state.late == 0)
            #expect(state.heard > count)
        }
    }

    /// Two watchers sharing one watch, one ignoring a name: each is told by its own rule.
    /// One watcher watching the directory under two paths keeps hearing of it under the
    /// other when one is removed. The directory deleted: every watcher polls it (both paths)
    /// and hears of it coming back.
    @Test func aSharedWatchFiltersByWatcherAndBreaksForEveryUser() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zone = temporary.path + "/Shared"
        let alias = zone + "/."
        let other = temporary.path + "/Other"
        for directory in [zone, other] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        func make(_ ignoring: Set<String>) -> (DirectoryWatcher, EventRecorder<String>) {
            let recorder = EventRecorder<String>()
            let watcher = DirectoryWatcher(method: .native, pollInterval: .milliseconds(20), ignoring: ignoring) {
                recorder.record($0)
            }
            return (watcher, recorder)
        }
        let (ignoring, ignoringEvents) = make(["lock"])
        let (plain, plainEvents) = make([])
        try ignoring.add(zone)
        try ignoring.add(other)
        try plain.add(zone)
        try plain.add(alias)
        try Data().write(to: URL(fileURLWithPath: zone + "/lock"))
        #expect(await plainEvents.wait(for: zone))
        #expect(await plainEvents.wait(for: alias))
        try Data().write(to: URL(fileURLWithPath: other + "/mark"))
        #expect(await ignoringEvents.wait(for: other))
        #expect(ignoringEvents.count(zone) == 0, "the ignored name is not reported")

        plain.remove(zone)
        let aliasSeen = plainEvents.count(alias)
        let zoneSeen = plainEvents.count(zone)
        try Data("x".utf8).write(to: URL(fileURLWithPath: zone + "/journal"))
        #expect(await plainEvents.wait(for: alias, count: aliasSeen + 1))
        #expect(await ignoringEvents.wait(for: zone))
        #expect(plainEvents.count(zone) == zoneSeen)

        try FileManager.default.removeItem(atPath: zone)
        for _ in 0..<300 where ignoring.method(for: zone) != .polling || plain.method(for: alias) != .polling {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(ignoring.method(for: zone) == .polling && plain.method(for: alias) == .polling)
        let seen = (ignoringEvents.count(zone), plainEvents.count(alias))
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        try Data("y".utf8).write(to: URL(fileURLWithPath: zone + "/journal"))
        #expect(await ignoringEvents.wait(for: zone, count: seen.0 + 1))
        #expect(await plainEvents.wait(for: alias, count: seen.1 + 1))
        ignoring.cancel()
        plain.cancel()
    }

    /// Watchers added, removed and cancelled from many threads at once on a few shared
    /// directories, some deleted and made again meanwhile: once every watcher is cancelled
    /// the kernel watches no directory (none leaked), and while one watcher is left on a
    /// directory it still hears of it (its watch was not removed under it).
    @Test func sharedWatchesAddedAndRemovedConcurrentlyAreNeitherLeakedNorLost() async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let zones = (0..<4).map { temporary.path + "/Z\($0)" }
        for zone in zones { try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true) }
        let keeperEvents = EventRecorder<String>()
        let keeper = DirectoryWatcher(method: .native) { keeperEvents.record($0) }
        try keeper.add(zones[0])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<60 {
                let watcher = DirectoryWatcher(method: .native, ignoring: round % 2 == 0 ? ["x"] : []) { _ in }
                for zone in zones.shuffled() { try? watcher.add(zone) }
                try? watcher.add(zones[round % 4] + "/.")
                // May fail while zones[3] is deleted: fine.
                _ = FileManager.default.createFile(atPath: zones[round % 4] + "/f\(thread)", contents: Data())
                if round % 3 == 0 { watcher.remove(zones[(round + thread) % 4]) }
                if thread == 7, round % 10 == 0 {
                    try? FileManager.default.removeItem(atPath: zones[3])
                    try? FileManager.default.createDirectory(atPath: zones[3], withIntermediateDirectories: true)
                }
                if round % 2 == 0 { watcher.cancel() }
            }
        }
        let seen = keeperEvents.count(zones[0])
        try Data("k".utf8).write(to: URL(fileURLWithPath: zones[0] + "/keeper"))
        #expect(await keeperEvents.wait(for: zones[0], count: seen + 1))
        #expect(keeper.method(for: zones[0]) == .native)
        keeper.cancel()
        // Every watcher is cancelled (or gone, which cancels it): each watch goes with its
        // last user. Waited for, up to a minute, rather than for a set time.
        var watched = zones
        for _ in 0..<6_000 {
            watched = try zones.filter { try DirectoryWatcherTests.isWatchedByInotify($0) }
            if watched.isEmpty { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(watched.isEmpty, "still watched: \(watched)")
    }

    #endif

    // MARK: DirectJSONEncoder's kept key orders

    /// A JSON value whose objects encode their members in the order given (possibly twice).
    indirect enum Node: Encodable {
        case number(Int)
        case text(String)
        case list([Node])
        case object([(String, Node)])

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .number(let value):
                var container = encoder.singleValueContainer()
                try container.encode(value)
            case .text(let value):
                var container = encoder.singleValueContainer()
                try container.encode(value)
            case .list(let values):
                var container = encoder.unkeyedContainer()
                for value in values { try container.encode(value) }
            case .object(let members):
                var container = encoder.container(keyedBy: Key.self)
                for (key, value) in members { try container.encode(value, forKey: Key(stringValue: key)) }
            }
        }

        var hasDuplicateKeys: Bool {
            switch self {
            case .number, .text: return false
            case .list(let values): return values.contains { $0.hasDuplicateKeys }
            case .object(let members):
                return Set(members.map(\.0)).count != members.count || members.contains { $0.1.hasDuplicateKeys }
            }
        }
    }


    private static let keyPool = [
        "a", "b", "A", "B", "id", "title", "", " ", "a b", "a/b", "q\"", "b\\s", "t\t", "n\n", "\u{1}",
        "10", "9", "1", "_", "~", "z", "Z", "aa", "ab", "a\r\n", "$schemaVersion",
    ]

    private static func node(_ depth: Int, _ generator: inout SplitMix64, duplicates: Bool) -> Node {
        switch depth > 3 ? Int.random(in: 0..<2, using: &generator) : Int.random(in: 0..<5, using: &generator) {
        case 0: return .number(Int.random(in: -5...5, using: &generator))
        case 1: return .text(keyPool.randomElement(using: &generator)!)
        case 2: return .list((0..<Int.random(in: 0..<4, using: &generator)).map { _ in
            node(depth + 1, &generator, duplicates: duplicates) })
        default:
            var keys = Array(keyPool.shuffled(using: &generator).prefix(Int.random(in: 0..<7, using: &generator)))
            if duplicates, !keys.isEmpty, Int.random(in: 0..<4, using: &generator) == 0 {
                keys.insert(keys.randomElement(using: &generator)!, at: Int.random(in: 0...keys.count, using: &generator))
            }
            return .object(keys.map { ($0, node(depth + 1, &generator, duplicates: duplicates)) })
        }
    }

    /// Many documents of many shapes (more than the orders kept), the same keys in other
    /// orders, nested and empty objects, one batch writer after the other: every document
    /// is JSONEncoder's bytes, or declined when an object has a key twice.
    @Test func keptKeyOrdersGiveJSONEncodersBytesForEveryShape() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var generator = SplitMix64(seed: 9)
        let batch = DirectJSONEncoder.Batch()
        var shapes: [Node] = []
        for _ in 0..<40 {
            var keys = Array(Self.keyPool.shuffled(using: &generator).prefix(5))
            shapes.append(.object(keys.map { ($0, .number(1)) }))
            keys.reverse()
            shapes.append(.object(keys.map { ($0, .object([("x", .number(2)), ("b", .object([]))])) }))
        }
        var documents: [Node] = []
        for index in 0..<3_000 {
            let inner = Self.node(0, &generator, duplicates: index % 3 == 0)
            documents.append(.object([("inner", inner), ("z", shapes[index % shapes.count]), ("a", .number(index))]))
            documents.append(shapes[(index * 7) % shapes.count])
            documents.append(.object([]))
        }
        var checked = 0
        for document in documents {
            let expected = try encoder.encode(document)
            do {
                let direct = try batch.encode(document)
                #expect(!document.hasDuplicateKeys, "a key twice was not declined")
                #expect(String(decoding: direct, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
                checked += 1
            } catch is DirectJSONEncoder.Declined {
                #expect(document.hasDuplicateKeys, "declined: \(String(decoding: expected, as: UTF8.self))")
            }
        }
        #expect(checked > 6_000)
    }

    /// An object with the keys of a kept order and one more (or one fewer), and an object
    /// with the kept keys but one of them twice in place of another.
    @Test func keptKeyOrdersAreNotReusedForOtherKeys() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let batch = DirectJSONEncoder.Batch()
        let documents: [Node] = [
            .object([("b", .number(1)), ("a", .number(2))]),
            .object([("b", .number(1)), ("a", .number(2)), ("c", .number(3))]),
            .object([("b", .number(1))]),
            .object([("b", .number(1)), ("b", .number(2))]),
            .object([("a", .number(1)), ("a", .number(2))]),
            .object([("b", .number(1)), ("a", .number(2))]),
        ]
        for document in documents {
            do {
                let direct = try batch.encode(document)
                #expect(!document.hasDuplicateKeys)
                #expect(direct == (try encoder.encode(document)))
            } catch is DirectJSONEncoder.Declined {
                #expect(document.hasDuplicateKeys)
            }
        }
    }

    // MARK: Packed decoding

    struct Item: Codable, Equatable, Recordable {
        static let migrations: [RecordMigration] = [.add("n", default: -1)]
        var id: String
        var n: Int
        var note: String
    }

    /// A large zone (several parts) whose first part gives no value at all (tombstones and
    /// failed migrations), with values in later parts, records listed out of creation order
    /// and records decoded under another id: every value lines up with its record.
    @Test func packedDecodingLinesUpAcrossEmptyPartsAndFailedMigrations() throws {
        let coder = SchemaCoder<Item>()
        let count = BatchJSONCoding.recordsPerParallelPart * 3 + 5
        let records = (0..<count).map { index -> StoredRecord in
            let fields: Data? = switch index {
            case ..<(count / 3): index % 2 == 0 ? nil : Data("[1]".utf8)  // tombstone, migration fails
            case _ where index % 89 == 0: Data(#"{"id":"r\#(index)","note":7}"#.utf8)  // decoding fails
            case _ where index % 101 == 0: Data(#"{"id":"other\#(index)","note":"n\#(index)"}"#.utf8)
            default: Data(#"{"id":"r\#(index)","note":"\#(String(repeating: "n", count: 30))\#(index)"}"#.utf8)
            }
            return StoredRecord(
                id: "r\(index)", version: 1, fields: fields, modified: HLCTimestamp(millis: 1_000 + Int64(index)),
                writer: "w", created: HLCTimestamp(millis: 1_000 + Int64(index)))
        }
        let decoded = coder.decodeAll(records)
        #expect(decoded.count == count)
        for (position, result) in decoded.results.enumerated() {
            if position < count / 3 {
                if position % 2 == 0 {
                    #expect(result == nil, "\(position)")
                } else {
                    #expect(throws: StoredRecordProblem.self, "\(position)") { try result?.get() }
                }
            } else if position % 89 == 0 {
                #expect(throws: StoredRecordProblem.self, "\(position)") { try result?.get() }
            } else {
                let value = try #require(try result?.get(), "\(position)")
                let id = position % 101 == 0 ? "other\(position)" : "r\(position)"
                #expect(value.id == id && value.n == -1 && value.note.hasSuffix("\(position)"), "\(position)")
            }
        }

        // Loaded in order and reversed: the same records shown, in creation order.
        for listed in [records, records.reversed()] {
            var set = ChangeSet(records: Array(listed), token: ChangeToken(generation: 1, sequence: 1), isComplete: true)
            var packed = coder.decodeAll(listed)
            var engine = SyncEngine<Item>(
                zone: .public("Item"), writerID: "w", configuration: MirrorConfiguration(), policy: .changedKeys)
            engine.load(&set, decoded: &packed)
            let expected = (count / 3..<count).filter { $0 % 89 != 0 }
                .map { $0 % 101 == 0 ? "other\($0)" : "r\($0)" }
            #expect(engine.records.array.map(\.id) == expected)
            for id in expected.prefix(50) { #expect(engine.records[id]?.note.hasSuffix(id.drop { !$0.isNumber }) == true) }
            #expect(engine.reportedUndecodable.count == (count / 3) / 2 + (count / 3..<count).filter { $0 % 89 == 0 }.count)
        }
    }
}
