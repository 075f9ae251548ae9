import Foundation

/// Encodes and decodes many records with one `JSONEncoder` / `JSONDecoder` call each.
///
/// Foundation's coders have a fixed cost per call that dominates for small records:
/// decoding 100,000 records one by one takes about three times as long as decoding the same
/// records as one array. So, for a decoder with default strategies (the one stored fields
/// are read with), every record is decoded where its fields lie by ``DirectJSONDecoder``,
/// which has no such fixed cost, in parallel parts for large batches; for any other decoder
/// a batch is joined into one JSON array (its fields objects are copied side by side with
/// commas) and decoded at once. Encoding does the reverse of joining,
/// splitting one encoded array with ``JSONScanner``. When the batch call fails (one record
/// no longer decodes, one value does not encode), the batch falls back to one call per
/// record, so each failure is still reported for its own record and every other record
/// gets through.
package enum BatchJSONCoding {
    /// Below this many records a batch is not worth joining.
    package static let minimumBatch = 16

    /// Decodes the fields of every live record in `records`, by record id.
    package static func decode<Record: Decodable & Sendable>(
        _ records: some Collection<StoredRecord>, as type: Record.Type, with decoder: JSONDecoder
    ) -> IDMap<Result<Record, any Error>> {
        var results = IDMap<Result<Record, any Error>>()
        results.reserveCapacity(records.count)
        for (record, result) in zip(records, decodeInOrder(records, as: type, with: decoder)) {
            if let result { results[record.id] = result }
        }
        return results
    }

    /// Decodes the fields of every record in `records`: element `i` of the result belongs to
    /// the `i`th record, `nil` for a tombstone.
    package static func decodeInOrder<Record: Decodable & Sendable>(
        _ records: some Collection<StoredRecord>, as type: Record.Type, with decoder: JSONDecoder
    ) -> [Result<Record, any Error>?] {
        decodeAll(records, as: type, with: decoder).results
    }

    /// Decodes the fields of every record in `records`, packed: position `i` is the `i`th
    /// record, missing for a tombstone or a record whose fields did not decode.
    ///
    /// A large batch gives back the pages of mapped fields it read (``MappedBytes``) as it
    /// goes, so that decoding a large zone whose fields were spilled holds a few of them at
    /// a time.
    package static func decodeAll<Record: Decodable & Sendable>(
        _ records: some Collection<StoredRecord>, as type: Record.Type, with decoder: JSONDecoder
    ) -> DecodedRecords<Record> {
        defer { if records.count >= recordsBetweenReleases { MappedBytes.releaseResidentPages() } }
        if DirectJSONDecoder.canStandIn(for: decoder) {
            return decodeDirectly(Array(records), as: type, with: decoder)
        }
        return DecodedRecords(decodeJoined(records, as: type, with: decoder))
    }

    /// How many records a part decodes between two releases of mapped pages: about 700 KB
    /// of 170-byte records.
    package static let recordsBetweenReleases = 4_096

    /// Decodes the fields of every record with `decoder`: the live records' fields joined
    /// into one array, decoded with one call, or one call per record when that fails.
    private static func decodeJoined<Record: Decodable & Sendable>(
        _ records: some Collection<StoredRecord>, as type: Record.Type, with decoder: JSONDecoder
    ) -> [Result<Record, any Error>?] {
        var liveCount = 0
        var joinedSize = 2
        for record in records {
            if let fields = record.fields {
                liveCount += 1
                joinedSize += fields.count + 1
            }
        }
        if liveCount >= minimumBatch {
            var joined = Data()
            joined.reserveCapacity(joinedSize)
            joined.append(UInt8(ascii: "["))
            for record in records {
                guard let fields = record.fields else { continue }
                if joined.count > 1 { joined.append(UInt8(ascii: ",")) }
                joined.append(fields)
            }
            joined.append(UInt8(ascii: "]"))
            if let values = try? decoder.decode([Record].self, from: joined), values.count == liveCount {
                var next = values.makeIterator()
                return records.map { record in
                    record.fields == nil ? nil : .success(next.next()!)
                }
            }
        }
        return records.map { record in
            record.fields.map { fields in Result { try decoder.decode(Record.self, from: fields) } }
        }
    }

    /// At least this many records per part before decoding is split across the cores.
    package static let recordsPerParallelPart = 2_048

    /// Decodes each record's fields where they lie with ``DirectJSONDecoder`` (no joined
    /// copy), falling back to `decoder` for a record it declines; large batches are split
    /// across the cores. Each part writes its values side by side from the start of its
    /// range in one array; the parts are then moved together, so the values are packed
    /// without a second array.
    private static func decodeDirectly<Record: Decodable & Sendable>(
        _ records: [StoredRecord], as type: Record.Type, with decoder: JSONDecoder
    ) -> DecodedRecords<Record> {
        var missing: [(position: Int, error: (any Error)?)] = []
        let values = [Record](unsafeUninitializedCapacity: records.count) { buffer, initialized in
            let output = ResultsBuffer(buffer: buffer)
            let parts = inParallelRanges(records.count) { range in
                var written = 0
                var missing: [(position: Int, error: (any Error)?)] = []
                for position in range {
                    if (position - range.lowerBound) % recordsBetweenReleases == recordsBetweenReleases - 1 {
                        MappedBytes.releaseResidentPages()
                    }
                    guard let fields = records[position].fields else {
                        missing.append((position, nil))
                        continue
                    }
                    do {
                        let value = try (try? DirectJSONDecoder.decode(type, from: fields))
                            ?? decoder.decode(type, from: fields)
                        (output.buffer.baseAddress! + range.lowerBound + written).initialize(to: value)
                        written += 1
                    } catch {
                        missing.append((position, error))
                    }
                }
                return (start: range.lowerBound, written: written, missing: missing)
            }
            initialized = 0
            guard let base = buffer.baseAddress else { return }
            for part in parts {
                if part.start != initialized {
                    (base + initialized).moveInitialize(from: base + part.start, count: part.written)
                }
                initialized += part.written
                missing += part.missing
            }
        }
        return DecodedRecords(values: values, missing: missing, count: records.count)
    }

    /// `element(&state, i)` for every `i` in `0..<count`, in order; for large counts computed
    /// in one part per core, in parallel, each part with its own `state`.
    package static func inParallelParts<Element, State>(
        _ count: Int, state makeState: @Sendable () -> State, _ element: @Sendable (inout State, Int) -> Element
    ) -> [Element] {
        [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            let output = ResultsBuffer(buffer: buffer)
            _ = inParallelRanges(count) { range in
                var state = makeState()
                for index in range {
                    (output.buffer.baseAddress! + index).initialize(to: element(&state, index))
                }
            }
            initialized = count
        }
    }

    /// `part(range)` for consecutive ranges that cover `0..<count`, in order: one range for
    /// small counts, else one per core (at least ``recordsPerParallelPart`` each), computed
    /// in parallel.
    package static func inParallelRanges<Part>(_ count: Int, _ part: @Sendable (Range<Int>) -> Part) -> [Part] {
        // A small count is one part, on this thread, without asking how many cores there are.
        guard count >= 2 * recordsPerParallelPart, processorCount > 1 else { return [part(0..<count)] }
        let parts = min(processorCount, count / recordsPerParallelPart)
        return concurrently(parts) { index in part((count * index / parts)..<(count * (index + 1) / parts)) }
    }

    /// `element(i)` for every `i` in `0..<count`, in order, computed in parallel where cores
    /// are free (`DispatchQueue.concurrentPerform`; nothing guarantees a thread per element,
    /// so no element may wait for another): for a few large pieces of work, such as the
    /// parts of a file.
    package static func concurrently<Element>(_ count: Int, _ element: @Sendable (Int) -> Element) -> [Element] {
        [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            let output = ResultsBuffer(buffer: buffer)
            DispatchQueue.concurrentPerform(iterations: count) { index in
                (output.buffer.baseAddress! + index).initialize(to: element(index))
            }
            initialized = count
        }
    }

    /// Runs `work` and `side` at the same time, on two cores (the calling thread takes one
    /// of them, as in ``inParallelRanges(_:_:)``), and returns `side`'s result once both
    /// are done. `work` may change the caller's state: nothing else runs it, and it is done
    /// before this returns.
    package static func run<Side>(_ work: () -> Void, alongside side: @Sendable () -> Side) -> Side {
        withoutActuallyEscaping(work) { work in
            let tasks = TwoTasks<Side>(work: work)
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 { tasks.work() } else { tasks.result = side() }
            }
            return tasks.result!
        }
    }

    /// What the two tasks of ``run(_:alongside:)`` share: each field is touched by one task
    /// only (`work` by the first; `result` by the second, then read after both are done),
    /// which is why sharing them is safe.
    private final class TwoTasks<Side>: @unchecked Sendable {
        let work: () -> Void
        var result: Side?

        init(work: @escaping () -> Void) { self.work = work }
    }

    /// The number of cores this process may use, read once. Foundation reads it from the
    /// control group's files on every call (about 25 µs on Linux, measured), which a commit of
    /// one record, that never splits its work, paid twice.
    package static let processorCount = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// The results of a parallel part: each part initializes its own range of elements, so
    /// no two threads touch one element (which is why sharing the pointer is safe).
    private struct ResultsBuffer<Element>: @unchecked Sendable {
        let buffer: UnsafeMutableBufferPointer<Element>
    }

    /// Encodes every value, in order; each result is the value's JSON object or the error
    /// encoding it raised.
    ///
    /// For an encoder ``DirectJSONEncoder`` stands in for, each value is encoded by it (a
    /// value it declines by `encoder`), in parallel parts for large batches, every value of
    /// a part into one buffer: each value's bytes are a slice of it (one allocation per
    /// part rather than two per value, and no copy per value). For any other encoder the
    /// batch is encoded as one array and split.
    package static func encode<Record: Encodable & Sendable>(
        _ values: [Record], with encoder: JSONEncoder
    ) -> [Result<Data, any Error>] {
        if DirectJSONEncoder.canStandIn(for: encoder) {
            let parts = inParallelRanges(values.count) { range in
                encodeDirectly(values[range], orWith: encoder)
            }
            return Array(parts.joined())
        }
        if values.count >= minimumBatch, let encoded = try? encoder.encode(values),
           let parts = splitArray(encoded), parts.count == values.count {
            return parts.map { .success($0) }
        }
        return values.map { value in Result { try encoder.encode(value) } }
    }

    /// Encodes `values` one after the other into one buffer with ``DirectJSONEncoder``
    /// (a value it declines with `encoder`, on its own): each result is a slice of the
    /// buffer, or the error `encoder` raised.
    private static func encodeDirectly<Record: Encodable>(
        _ values: ArraySlice<Record>, orWith encoder: JSONEncoder
    ) -> [Result<Data, any Error>] {
        let batch = DirectJSONEncoder.Batch()
        var output = JSONByteWriter(capacity: 4_096)
        /// Where each value's bytes end in `output`; `nil` for a value `encoder` encoded.
        var ends: [Int?] = []
        ends.reserveCapacity(values.count)
        var others: [Int: Result<Data, any Error>] = [:]
        // By index: in generic code, an enumerated sequence's iterator, looking up the
        // metadata of its (offset, element) tuple for every value, was a seventh of encoding.
        for offset in 0..<values.count {
            let value = values[values.startIndex + offset]
            if offset == 64 {
                // Room for the rest at the first values' size, so the buffer is not grown
                // (copied and faulted in again) by doubling.
                output.bytes.reserveCapacity(output.count / 64 * (values.count + values.count / 8))
            }
            if (try? batch.encode(value, appendingTo: &output)) != nil {
                ends.append(output.count)
            } else {
                ends.append(nil)
                others[offset] = Result { try encoder.encode(value) }
            }
        }
        let buffer = Data(output.bytes)
        var start = 0
        return ends.enumerated().map { offset, end in
            guard let end else { return others[offset]! }
            defer { start = end }
            return .success(buffer[start..<end])
        }
    }

    /// The elements of a JSON array, as the bytes of each, or `nil` if `data` is not one
    /// valid array.
    package static func splitArray(_ data: Data) -> [Data]? {
        data.withUnsafeBytes { raw -> [Data]? in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var scanner = JSONScanner(base: base, count: raw.count)
            scanner.skipWhitespace()
            guard scanner.consume(UInt8(ascii: "[")) else { return nil }
            var parts: [Data] = []
            scanner.skipWhitespace()
            if scanner.consume(UInt8(ascii: "]")) {
                scanner.skipWhitespace()
                return scanner.isAtEnd ? parts : nil
            }
            while true {
                scanner.skipWhitespace()
                let start = scanner.position
                guard scanner.skipValue() else { return nil }
                parts.append(Data(bytes: base + start, count: scanner.position - start))
                scanner.skipWhitespace()
                if scanner.consume(UInt8(ascii: ",")) { continue }
                guard scanner.consume(UInt8(ascii: "]")) else { return nil }
                scanner.skipWhitespace()
                return scanner.isAtEnd ? parts : nil
            }
        }
    }
}
