import Foundation
import Testing

@testable import MagicMirror

/// `JSONFileFormat.JournalAppend`: a run of lines added at once (built in parallel parts
/// when long) gives the bytes the same lines added one by one give.
@Suite(.timeLimit(.minutes(5))) struct JournalAppendTests {
    /// Records of every shape a line has: saves and deletes, ids and writers that need
    /// escapes, fields on one line (`fields`) and on several (`fieldsText`).
    private static func records(_ count: Int, first: Int = 0) -> [StoredRecord] {
        (first..<(first + count)).map { index in
            let fields: Data? = switch index % 7 {
            case 0: nil
            case 1: Data("{\n  \"text\" : \"line \(index)\"\n}".utf8)
            default: Data(#"{"n":\#(index),"s":"\u00e9\#(index)"}"#.utf8)
            }
            return StoredRecord(
                id: index % 11 == 0 ? "quote\"\(index)\\" : "id-\(index)", version: index % 5 + 1,
                fields: fields, modified: HLCTimestamp(millis: 1_763_703_120_000 + Int64(index), counter: UInt32(index % 3)),
                writer: index % 13 == 0 ? "writer/\u{1}" : "writer-1")
        }
    }

    /// The sealed bytes of `commits`, every line added one by one.
    private static func oneByOne(_ commits: [(sequence: Int, records: [StoredRecord])]) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 0)
        for (index, commit) in commits.enumerated() {
            for (position, record) in commit.records.enumerated() {
                append.add(
                    sequence: commit.sequence, record: record,
                    isLast: index == commits.count - 1 && position == commit.records.count - 1)
            }
        }
        return Array(append.sealed().joined())
    }

    /// The sealed bytes of `commits`, each commit's lines added as one run (the last line
    /// of the append alone).
    private static func byRuns(_ commits: [(sequence: Int, records: [StoredRecord])]) -> [UInt8] {
        var append = JSONFileFormat.JournalAppend(capacity: 1_024)
        for (index, commit) in commits.enumerated() {
            if index == commits.count - 1 {
                append.add(sequence: commit.sequence, records: commit.records.dropLast())
                append.add(sequence: commit.sequence, record: commit.records[commit.records.count - 1], isLast: true)
            } else {
                append.add(sequence: commit.sequence, records: commit.records[...])
            }
        }
        return Array(append.sealed().joined())
    }

    @Test(arguments: [1, 2, JSONFileFormat.linesBuiltInParallel - 1, JSONFileFormat.linesBuiltInParallel + 1,
                      3 * JSONFileFormat.linesBuiltInParallel + 5])
    func aRunOfLinesIsTheSameAsLinesAddedOneByOne(count: Int) {
        let commits = [(sequence: 41, records: Self.records(count))]
        let same = Self.byRuns(commits) == Self.oneByOne(commits)  // not printed: megabytes
        #expect(same)
    }

    @Test func runsOfSeveralCommitsAreTheSameAsLinesAddedOneByOne() {
        let long = JSONFileFormat.linesBuiltInParallel + 17
        let commits = [
            (sequence: 7, records: Self.records(3)),
            (sequence: 8, records: Self.records(long, first: 3)),
            (sequence: 9, records: Self.records(long + 1, first: 3 + long)),
        ]
        let bytes = Self.byRuns(commits)
        let same = bytes == Self.oneByOne(commits)
        #expect(same)
        // And a reader reads them back as written.
        var parser = JSONFileFormat.LineParser()
        let scan = bytes.withUnsafeBufferPointer {
            JSONFileFormat.scanJournal($0.baseAddress!, count: $0.count, after: 0, parser: &parser)
        }
        #expect(scan.consumed == bytes.count)
        #expect(scan.bad.isEmpty)
        #expect(scan.commits.map(\.sequence) == [7, 8, 9])
        let sameIDs = scan.commits.map { $0.records.map(\.id) } == commits.map { $0.records.map(\.id) }
        #expect(sameIDs)
        let sameFields = scan.commits.flatMap { $0.records.map(\.fields) } == commits.flatMap { $0.records.map(\.fields) }
        #expect(sameFields)
    }

    /// A long run's parts are kept as built, not copied into one buffer: the lines before
    /// the run, its parts and the lines after it are separate parts, which together are the
    /// bytes the lines added one by one give.
    @Test func aLongRunIsKeptInTheBuffersItWasBuiltIn() {
        let records = Self.records(JSONFileFormat.linesBuiltInParallel + 2)
        var append = JSONFileFormat.JournalAppend(capacity: 0)
        append.add(sequence: 3, record: records[0], isLast: false)
        append.add(sequence: 3, records: records[1..<(records.count - 1)])
        append.add(sequence: 3, record: records[records.count - 1], isLast: true)
        let count = append.count
        let parts = append.sealed()
        #expect(parts.count >= 3)
        #expect(parts.reduce(0) { $0 + $1.count } == count)
        let same = Array(parts.joined()) == Self.oneByOne([(sequence: 3, records: records)])
        #expect(same)
    }
}
