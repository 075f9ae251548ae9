import Foundation
import MagicMirror
import Testing

private struct Item: Codable, Equatable {
    var id: String
    var n: Int
}

/// A value that refuses to encode when `n` is negative.
private struct Picky: Encodable {
    var n: Int
    func encode(to encoder: any Encoder) throws {
        guard n >= 0 else { throw EncodingError.invalidValue(n, .init(codingPath: [], debugDescription: "negative")) }
        var container = encoder.singleValueContainer()
        try container.encode(["n": n])
    }
}

@Suite(.timeLimit(.minutes(5))) struct BatchJSONCodingTests {
    private func stored(_ id: String, _ json: String?) -> StoredRecord {
        StoredRecord(id: id, version: 1, fields: json.map { Data($0.utf8) }, modified: .zero, writer: "w")
    }

    @Test(arguments: [3, 40])
    func decodesEveryLiveRecordByID(count: Int) throws {
        var records = (0..<count).map { stored("r\($0)", #"{"id":"r\#($0)","n":\#($0)}"#) }
        records.append(stored("gone", nil))
        let decoded = BatchJSONCoding.decode(records, as: Item.self, with: JSONDecoder())
        #expect(decoded.count == count)
        for index in 0..<count {
            #expect(try decoded["r\(index)"]?.get() == Item(id: "r\(index)", n: index))
        }
        #expect(decoded["gone"] == nil)
    }

    @Test(arguments: [5, 40])
    func inOrderResultsLineUpWithTheRecordsAndSkipTombstones(count: Int) throws {
        let records = (0..<count).map { index in
            index % 4 == 1 ? stored("r\(index)", nil) : stored("r\(index)", #"{"id":"r\#(index)","n":\#(index)}"#)
        }
        let decoded = BatchJSONCoding.decodeInOrder(records, as: Item.self, with: JSONDecoder())
        #expect(decoded.count == count)
        for (index, result) in decoded.enumerated() {
            if index % 4 == 1 {
                #expect(result == nil)
            } else {
                #expect(try result?.get() == Item(id: "r\(index)", n: index))
            }
        }
    }

    @Test func oneUndecodableRecordFailsAloneInABatch() throws {
        var records = (0..<40).map { stored("r\($0)", #"{"id":"r\#($0)","n":\#($0)}"#) }
        records[17] = stored("r17", #"{"id":"r17","n":"not a number"}"#)
        let decoded = BatchJSONCoding.decode(records, as: Item.self, with: JSONDecoder())
        #expect(decoded.count == 40)
        #expect(throws: DecodingError.self) { try decoded["r17"]!.get() }
        #expect(try decoded["r18"]?.get() == Item(id: "r18", n: 18))
    }

    @Test(arguments: [2, 40])
    func encodesEachValueAsItsOwnObject(count: Int) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let values = (0..<count).map { Item(id: "id \"\($0)\" ,[]{}", n: $0) }
        let encoded = BatchJSONCoding.encode(values, with: encoder)
        #expect(encoded.count == count)
        for (value, data) in zip(values, encoded) {
            #expect(try data.get() == encoder.encode(value))
        }
    }

    @Test func oneUnencodableValueFailsAloneInABatch() throws {
        let values = (0..<40).map { Picky(n: $0 == 5 ? -1 : $0) }
        let encoded = BatchJSONCoding.encode(values, with: JSONEncoder())
        #expect(encoded.count == 40)
        #expect(throws: EncodingError.self) { try encoded[5].get() }
        #expect(try encoded[6].get() == Data(#"{"n":6}"#.utf8))
    }

    @Test func splitsOnlyValidArrays() {
        #expect(BatchJSONCoding.splitArray(Data(" [ {\"a\":[1,2]} , 3, \"x,y\" ] ".utf8))?.map {
            String(decoding: $0, as: UTF8.self)
        } == ["{\"a\":[1,2]}", "3", "\"x,y\""])
        #expect(BatchJSONCoding.splitArray(Data("[]".utf8)) == [])
        for bad in ["", "{}", "[1,]", "[1 2]", "[1", "[1] x"] {
            #expect(BatchJSONCoding.splitArray(Data(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test(arguments: [0, 1, 500, 2 * BatchJSONCoding.recordsPerParallelPart - 1])
    func aSmallCountIsOnePartOnTheCallingThread(count: Int) {
        let caller = pthread_self()
        let parts = BatchJSONCoding.inParallelRanges(count) { range in
            (range, pthread_equal(pthread_self(), caller) != 0)
        }
        #expect(parts.count == 1)
        #expect(parts.first?.0 == 0..<count)
        #expect(parts.first?.1 == true)
    }

    @Test(arguments: [2 * BatchJSONCoding.recordsPerParallelPart, 100_000])
    func aLargeCountIsOnePartPerCoreCoveringEveryIndexInOrder(count: Int) {
        let parts = BatchJSONCoding.inParallelRanges(count) { $0 }
        let cores = BatchJSONCoding.processorCount
        #expect(parts.count == (cores > 1 ? min(cores, count / BatchJSONCoding.recordsPerParallelPart) : 1))
        #expect(parts.first?.lowerBound == 0)
        #expect(parts.last?.upperBound == count)
        #expect(zip(parts, parts.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound && !$0.isEmpty })
        #expect(BatchJSONCoding.processorCount == max(1, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// Every element is computed once, and the results come in order.
    @Test(arguments: [0, 1, 2, 7])
    func concurrentlyGivesEveryElementInOrder(count: Int) {
        #expect(BatchJSONCoding.concurrently(count) { $0 * $0 } == (0..<count).map { $0 * $0 })
    }
}
