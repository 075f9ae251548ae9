/// What decoding a batch of stored records gave, packed: the values of the records that
/// decoded, side by side in the batch's order, and the positions that gave none.
///
/// Opening a large zone decodes every record and shows the values as they are: packed,
/// they become the mirror's array without a copy. (An array of one optional `Result` per
/// record was 6.4 MB at 100,000 records, alive beside the array the mirror shows, at the
/// peak of opening.) Positions without a value are few: tombstones and records that did
/// not decode.
package struct DecodedRecords<Record> {
    /// The values of the records that decoded, in the order of their positions.
    package var values: [Record]
    /// The positions without a value, in increasing order, each with the error its record
    /// gave, or `nil` for a tombstone.
    package var missing: [(position: Int, error: (any Error)?)]
    /// The number of records decoded: every position is a value or missing.
    package private(set) var count: Int

    /// Nothing decoded.
    package init() {
        values = []
        missing = []
        count = 0
    }

    /// The packed form of one result per record: `nil` for a tombstone.
    package init(_ results: [Result<Record, any Error>?]) {
        values = []
        missing = []
        count = results.count
        for (position, result) in results.enumerated() {
            switch result {
            case .success(let value)?: values.append(value)
            case .failure(let error)?: missing.append((position, error))
            case nil: missing.append((position, nil))
            }
        }
    }

    /// Values and missing positions that together cover `0..<count`.
    package init(values: [Record], missing: [(position: Int, error: (any Error)?)], count: Int) {
        precondition(values.count + missing.count == count, "every position is a value or missing")
        self.values = values
        self.missing = missing
        self.count = count
    }

    /// One result per record, in order: `nil` for a tombstone.
    package var results: [Result<Record, any Error>?] {
        valueIndices.enumerated().map { position, index in
            index >= 0 ? .success(values[index]) : error(at: position).map { .failure($0) }
        }
    }

    /// Where each position's value lies in ``values``, or `-1` for a missing position.
    package var valueIndices: [Int] {
        var walk = Walk(self)
        return (0..<count).map { walk.valueIndex(at: $0) ?? -1 }
    }

    /// Finds where each position's value lies in ``values``, the positions taken in
    /// increasing order, each once: constant time a position, no table of them.
    package struct Walk {
        private let missing: [(position: Int, error: (any Error)?)]
        private var nextValue = 0
        private var nextMissing = 0

        package init(_ decoded: DecodedRecords) { missing = decoded.missing }

        /// The index in ``DecodedRecords/values`` of `position`'s value, or `nil` when it is
        /// missing. `position` must be the one after the last asked about (0 first).
        package mutating func valueIndex(at position: Int) -> Int? {
            if nextMissing < missing.count, missing[nextMissing].position == position {
                nextMissing += 1
                return nil
            }
            nextValue += 1
            return nextValue - 1
        }
    }

    /// The error of a missing position (`nil` for a tombstone or a position with a value).
    package func error(at position: Int) -> (any Error)? {
        var low = 0
        var high = missing.count
        while low < high {
            let middle = (low + high) / 2
            if missing[middle].position < position { low = middle + 1 } else { high = middle }
        }
        return low < missing.count && missing[low].position == position ? missing[low].error : nil
    }
}
