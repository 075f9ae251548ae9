// Loading: the zone's first content, shown as the database holds it.

extension SyncEngine {
    /// Takes the whole zone as the initial content. Position `i` of `decoded` is what
    /// decoding `set.records[i]` gave.
    ///
    /// Empties `set.records` and `decoded` once they are taken, before the shown records'
    /// tables are built, so that opening a large zone does not hold both at once. When the
    /// records come in the order they are shown (usually), the decoded values become the
    /// shown array as they are, without a copy.
    mutating func load(_ set: inout ChangeSet, decoded: inout DecodedRecords<Record>) {
        var newest = HLCTimestamp.zero
        // Each shown record's id, as the stored record's string when it has the same bytes:
        // the mirror's tables then share the database's strings instead of holding copies.
        // `nil` while the records are shown one for one in the order of the database's own
        // table of them (each live, decoded, under the same id bytes): that table's array of
        // ids then serves as it is, shared until either side adds or removes a record.
        var ids: [String]?
        let table: IDMap<StoredRecord>?
        var shown: [Record] = []
        do {
            let stored = set.records
            // Creation order, the same in every process (see Views/CreationOrder.swift). A
            // zone's records usually come in that order already: then no index array is
            // sorted (it would be alive at the peak of opening a large zone).
            func precedes(_ left: Int, _ right: Int) -> Bool {
                CreationOrder(created: stored[left].created, id: stored[left].id)
                    < CreationOrder(created: stored[right].created, id: stored[right].id)
            }
            let inOrder = stored.indices.dropFirst().allSatisfy { precedes($0 - 1, $0) }
            let order = inOrder ? nil : stored.indices.sorted(by: precedes)
            table = inOrder ? set.recordsByID : nil
            if table == nil {
                ids = []
                ids!.reserveCapacity(stored.count)
            }
            if inOrder, let found = Self.newestIfShownAsStored(stored, decoded) {
                // The usual case, checked in parallel parts: nothing to walk, and each id is
                // its stored record's (when there is no table of them to share).
                newest = found
                swap(&shown, &decoded.values)
                if ids != nil { ids = stored.map(\.id) }
            } else {
                // In order, the values are shown as they are: `shown` takes them, and a walk of
                // the positions finds each record's value in it. Out of order, each value is
                // looked up in a table of where they lie.
                var walk = DecodedRecords.Walk(decoded)
                let values: [Record]
                let valueIndices: [Int]?
                if inOrder {
                    swap(&shown, &decoded.values)
                    values = []
                    valueIndices = nil
                } else {
                    values = decoded.values
                    valueIndices = decoded.valueIndices
                    shown.reserveCapacity(values.count)
                }
                // The ids of the records shown so far, while they are `stored[..<position]`.
                func formIDs(upTo position: Int) {
                    var formed: [String] = []
                    formed.reserveCapacity(stored.count)
                    formed.append(contentsOf: stored[..<position].lazy.map(\.id))
                    ids = formed
                }
                for position in stored.indices {
                    let index = order?[position] ?? position
                    let record = stored[index]
                    if record.modified > newest { newest = record.modified }
                    let value: Record?
                    if let valueIndices {
                        value = valueIndices[index] >= 0 ? values[valueIndices[index]] : nil
                    } else {
                        value = walk.valueIndex(at: index).map { shown[$0] }
                    }
                    guard let value else {
                        if ids == nil { formIDs(upTo: position) }
                        if !record.isDeleted, let error = decoded.error(at: index) {
                            reportUndecodable(record, error: error)
                        }
                        continue
                    }
                    if !inOrder { shown.append(value) }
                    let id = value.recordID
                    let same = IDKey.same(id, record.id)
                    if ids == nil {
                        if same { continue }
                        formIDs(upTo: position)
                    }
                    ids!.append(same ? record.id : id)
                }
            }
        }
        observeClocks(newest: newest, of: set.records)
        pull.load(set)
        set.records = []
        decoded = DecodedRecords()
        if let ids {
            records.load(shown, ids: ids)
        } else {
            records.load(shown, indexOf: table!)
        }
    }

    /// The newest clock of `stored` when every record is live and decoded, at its own
    /// position, and each value has its record's id (the usual case): checked in parallel
    /// parts, since it reads every value's id. `nil` otherwise.
    private static func newestIfShownAsStored(
        _ stored: [StoredRecord], _ decoded: DecodedRecords<Record>
    ) -> HLCTimestamp? {
        guard decoded.missing.isEmpty, decoded.values.count == stored.count else { return nil }
        let values = decoded.values
        let parts = BatchJSONCoding.inParallelRanges(stored.count) { range -> HLCTimestamp? in
            var newest = HLCTimestamp.zero
            for index in range {
                if stored[index].modified > newest { newest = stored[index].modified }
                guard IDKey.same(values[index].recordID, stored[index].id) else { return nil }
            }
            return newest
        }
        var newest = HLCTimestamp.zero
        for part in parts {
            guard let part else { return nil }
            newest = max(newest, part)
        }
        return newest
    }
}
