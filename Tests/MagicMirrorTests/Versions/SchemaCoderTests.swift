import Foundation
@testable import MagicMirror
import Testing

/// The parts behind versions: reading a record's schema version, completing saved fields
/// with what the type does not know, and ``RecordFields``.
@Suite(.timeLimit(.minutes(5))) struct SchemaCoderTests {
    struct Plain: Recordable {
        var id: String
        var title: String
        var note: String?
    }

    struct Versioned: Recordable {
        static let migrations: [RecordMigration] = [.add("priority", default: 0), .drop("old")]
        var id: String
        var title: String
        var priority = 0
    }

    private func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

    @Test func theSchemaVersionIsReadWhereverTheFieldIs() {
        let coder = SchemaCoder<Versioned>()
        #expect(coder.storedVersion(of: Data(#"{"$schemaVersion":3,"id":"a"}"#.utf8)) == 3)
        #expect(coder.storedVersion(of: Data(#"{"id":"a","$schemaVersion":12}"#.utf8)) == 12)
        #expect(coder.storedVersion(of: Data(#"{ "$schemaVersion" : 4 }"#.utf8)) == 4)
        #expect(coder.storedVersion(of: Data(#"{"id":"a"}"#.utf8)) == 1)
        // Only a top-level field counts.
        #expect(coder.storedVersion(of: Data(#"{"inner":{"$schemaVersion":9},"id":"a"}"#.utf8)) == 1)
        #expect(coder.storedVersion(of: Data(#"{"title":"\"$schemaVersion\": 5"}"#.utf8)) == 1)
    }

    @Test func aTypeWithoutMigrationsStoresExactlyWhatItEncodes() throws {
        let coder = SchemaCoder<Plain>()
        let value = Plain(id: "a", title: "t", note: "n")
        let encoded = try StoredFieldsFormat.makeEncoder().encode(value)
        #expect(try coder.fields(for: value, over: nil) == encoded)
        #expect(try coder.fields(for: value, over: encoded) == encoded)
    }

    @Test func savedFieldsKeepWhatTheTypeDoesNotKnowAndLoseWhatItCleared() throws {
        let coder = SchemaCoder<Plain>()
        let stored = Data(#"{"extra":[1,2.50],"id":"a","note":"n","title":"t"}"#.utf8)
        let fields = try coder.fields(for: Plain(id: "a", title: "u", note: nil), over: stored)
        #expect(text(fields) == #"{"extra":[1,2.50],"id":"a","title":"u"}"#)
    }

    @Test func savedFieldsCarryTheNewerOfTheTwoSchemaVersions() throws {
        let coder = SchemaCoder<Versioned>()
        let value = Versioned(id: "a", title: "t", priority: 2)
        #expect(text(try coder.fields(for: value, over: nil)) == #"{"$schemaVersion":3,"id":"a","priority":2,"title":"t"}"#)
        let older = Data(#"{"id":"a","old":true,"title":"t"}"#.utf8)
        #expect(text(try coder.fields(for: value, over: older)) == #"{"$schemaVersion":3,"id":"a","priority":2,"title":"t"}"#)
        let newer = Data(#"{"$schemaVersion":8,"id":"a","more":1,"priority":0,"title":"t"}"#.utf8)
        #expect(text(try coder.fields(for: value, over: newer))
            == #"{"$schemaVersion":8,"id":"a","more":1,"priority":2,"title":"t"}"#)
    }

    @Test func migratingLeavesCurrentAndNewerRecordsAsTheyAre() throws {
        let coder = SchemaCoder<Versioned>()
        let current = Data(#"{"$schemaVersion":3,"id":"a","priority":1,"title":"t"}"#.utf8)
        #expect(try coder.migrate(current) == current)
        let newer = Data(#"{"$schemaVersion":4,"id":"a","title":"t"}"#.utf8)
        #expect(try coder.migrate(newer) == newer)
        #expect(text(try coder.migrate(Data(#"{"$schemaVersion":2,"id":"a","old":1,"title":"t"}"#.utf8)))
            == #"{"$schemaVersion":3,"id":"a","title":"t"}"#, "only the steps after version 2")
        #expect(throws: StoredRecordProblem.self) { try coder.migrate(Data("[1]".utf8)) }
    }

    @Test func recordFieldsReadWriteRenameAndRemove() throws {
        var fields = try #require(RecordFields(json: Data(#"{"a":1,"b":"x","c":null}"#.utf8)))
        #expect(fields.names == ["a", "b", "c"])
        #expect(try fields.value("a", as: Int.self) == 1)
        #expect(try fields.value("missing", as: Int.self) == nil)
        #expect(fields.contains("c"))
        #expect(throws: MirrorError.self) { try fields.value("b", as: Int.self) }
        try fields.set("d", to: [true])
        fields.rename("a", to: "e")
        fields.remove("b")
        #expect(text(fields.json) == #"{"c":null,"d":[true],"e":1}"#)
    }

    @Test func aFieldNameIsQuotedAsJSONEncoderQuotesIt() throws {
        let names = ["a", "priority", "", "with space", "é and 日本", "a/b", "quote\"d", "back\\slash",
                     "tab\tline\n", "\u{7F}del", "\u{2028}", "$schemaVersion", "emoji 🙂"]
        for name in names {
            #expect(RecordFields.keyToken(name) == (try JSONEncoder().encode(name)), "\(name)")
        }
    }

    /// Migration runs in parallel parts for large batches: every record still gets its own
    /// result, in order, and a failing record fails alone.
    @Test func aLargeBatchMigratesEveryRecordInOrderAndFailsOnlyTheBadOnes() throws {
        let coder = SchemaCoder<Versioned>()
        let count = BatchJSONCoding.recordsPerParallelPart * 2 + 7
        let records = (0..<count).map { index -> StoredRecord in
            let fields: Data? = switch index % 97 {
            case 5: nil
            case 11: Data(#"{"id":"x","title":7}"#.utf8)
            case 13: Data("[1]".utf8)
            default: Data(#"{"id":"r\#(index)","old":true,"title":"t\#(index)"}"#.utf8)
            }
            return StoredRecord(
                id: "r\(index)", version: 1, fields: fields, modified: HLCTimestamp(millis: 1, counter: 0), writer: "w")
        }
        let results = coder.decodeInOrder(records)
        #expect(results.count == count)
        for (index, result) in results.enumerated() {
            switch index % 97 {
            case 5: #expect(result == nil)
            case 11, 13:
                guard case .failure(let error)? = result else { Issue.record("record \(index) decoded"); continue }
                #expect(error is StoredRecordProblem)
            default:
                let value = try #require(try result?.get())
                #expect(value.id == "r\(index)" && value.title == "t\(index)" && value.priority == 0)
            }
        }
    }
}

/// The quick check that a save loses no stored field.
@Suite(.timeLimit(.minutes(5))) struct StoredKeysTests {
    private func covered(_ stored: String, _ written: String) -> Bool {
        StoredKeys.areCovered(Data(stored.utf8), by: Data(written.utf8))
    }

    @Test func everyStoredKeyWrittenAgainIsCovered() {
        #expect(covered(#"{"a":1,"b":{"x":[1,2]},"c":"s"}"#, #"{"a":2,"b":null,"c":"t"}"#))
        #expect(covered(#"{"b":1}"#, #"{"a":1,"b":2,"c":3}"#))
        #expect(covered("{}", #"{"a":1}"#))
        #expect(covered(" { } ", "{}"))
    }

    @Test func aMissingKeyIsNotCovered() {
        #expect(!covered(#"{"a":1,"b":2}"#, #"{"a":1}"#))
        #expect(!covered(#"{"a":1,"z":2}"#, #"{"a":1,"b":2}"#))
        #expect(!covered(#"{"ab":1}"#, #"{"a":1,"abc":2}"#))
    }

    @Test func anythingUnusualTakesTheExactPath() {
        // Unsorted, escaped differently, or not an object: never a wrong "covered".
        #expect(!covered(#"{"b":1,"a":2}"#, #"{"b":1}"#))
        #expect(!covered(#"{"\u0061":1}"#, #"{"a":1}"#))
        #expect(!covered(#"{"a":1"#, #"{"a":1}"#))
        #expect(!covered("[1]", #"{"a":1}"#))
        #expect(!covered(#"{"a":1}"#, "[1]"))
    }
}
