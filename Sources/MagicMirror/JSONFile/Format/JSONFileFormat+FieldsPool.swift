import Foundation

/// Records' fields copied out of the bytes read into a few large buffers (snapshots and
/// journals).
extension JSONFileFormat {
    /// The fields of many records copied into a few large buffers as they are read, each
    /// record given its part as a `Data` slice of one (which costs no allocation of its
    /// own). A separate `Data` per record costs about 120 bytes more each (the storage
    /// object and the allocation's rounding), and one allocation and release each.
    ///
    /// With a spill, a full buffer is written to it and the records are given slices of the
    /// mapped copy; the buffer is then filled again.
    struct FieldsPool {
        /// The size of a buffer (a larger one holds fields larger than this).
        static let bufferSize = 1 << 20
        private var buffer: UnsafeMutableRawPointer?
        private var capacity = 0
        private var used = 0
        /// The records whose fields are in the current buffer (by the number their owner
        /// gave), and where.
        private var placed: [(record: Int, start: Int, count: Int)] = []
        /// Where full buffers go, or `nil` to keep them in memory.
        private let spill: FieldsSpill?

        init(spill: FieldsSpill?) {
            self.spill = spill
        }

        /// Copies the fields of record number `index` into the current buffer; when it is
        /// full, first gives the records in it their fields (``finish(_:)``).
        mutating func add(
            _ bytes: LineParser.FieldsBytes, from base: UnsafePointer<UInt8>, for index: Int,
            give: (_ record: Int, _ fields: Data) -> Void
        ) {
            let count = bytes.count
            if used + count > capacity {
                finish(give)
                if count > capacity {
                    // No buffer (or one given away), or one too small for these fields.
                    free(buffer)
                    capacity = FieldsSpill.roundedToPages(max(Self.bufferSize, count))
                    buffer = malloc(capacity)
                    guard buffer != nil else { fatalError("out of memory reading a snapshot") }
                }
            }
            let target = buffer! + used
            switch bytes {
            case .range(let range):
                target.copyMemory(from: base + range.lowerBound, byteCount: count)
            case .data(let data):
                data.withUnsafeBytes { if count > 0 { target.copyMemory(from: $0.baseAddress!, byteCount: count) } }
            }
            placed.append((index, used, count))
            used += count
        }

        /// Frees the current buffer without giving its fields to any record.
        mutating func discard() {
            free(buffer)
            buffer = nil
            placed.removeAll()
            used = 0
            capacity = 0
        }

        /// Gives the records in the current buffer their fields (`give`, with each record's
        /// number): spilled (the buffer is then kept, to be filled again), else the buffer
        /// itself, let go.
        mutating func finish(_ give: (_ record: Int, _ fields: Data) -> Void) {
            guard let buffer, !placed.isEmpty else { return }
            let data: Data
            if let spilled = spill?.keep(UnsafeMutableRawBufferPointer(start: buffer, count: capacity), count: used) {
                data = spilled
            } else {
                data = Data(bytesNoCopy: buffer, count: used, deallocator: .free)
                self.buffer = nil
                capacity = 0
            }
            for (record, start, count) in placed { give(record, data[start..<(start + count)]) }
            placed.removeAll(keepingCapacity: true)
            used = 0
        }
    }

    /// The bytes of `fields` copied into a few large buffers (``FieldsPool``), spilled to
    /// `spill` when there is one, as a `Data` slice of one each, in order (`nil` for `nil`).
    static func pooledFields(
        _ fields: [LineParser.FieldsBytes?], from base: UnsafePointer<UInt8>, spill: FieldsSpill? = nil
    ) -> [Data?] {
        var pool = FieldsPool(spill: spill)
        var result = [Data?](repeating: nil, count: fields.count)
        for (index, bytes) in fields.enumerated() {
            guard let bytes else { continue }
            pool.add(bytes, from: base, for: index) { result[$0] = $1 }
        }
        pool.finish { result[$0] = $1 }
        pool.discard()
        return result
    }
}
