import Foundation

/// Reading journals: lines grouped into commits and appends, with the bad lines and the
/// repeated sequence numbers set apart.
extension JSONFileFormat {
    /// One decoded journal line.
    struct JournalEntry {
        var sequence: Int
        var record: StoredRecord
        var isLast: Bool
        /// The checksum of the append this line ends (absent on other lines, and on the last
        /// lines of appends written before checksums existed).
        var seal: Seal?

        /// What an append's last line says of the append.
        struct Seal {
            /// The number of the append's bytes before this line.
            var prior: Int
            /// The checksum (see ``JSONFileFormat/appendChecksum(_:count:sumAt:)``).
            var sum: UInt64
            /// Where the checksum's 16 digits are, in the buffer the line was parsed from.
            var sumOffset: Int
        }
    }

    /// The result of reading a stretch of journal.
    struct JournalScan {
        /// Complete commits, in order: sequence and changed records.
        var commits: [(sequence: Int, records: [StoredRecord])] = []
        /// Bytes from the start of the stretch to the end of the last complete append.
        var consumed = 0
        /// Lines within `consumed` that do not decode: offset and length (newline included),
        /// relative to the stretch.
        var bad: [(offset: Int, length: Int)] = []
        /// Complete commits whose sequence number is not above every one before them (the
        /// reader's and the stretch's): the offset and length of their lines, and the number.
        /// They are not in `commits`.
        var repeated: [(offset: Int, length: Int, sequence: Int)] = []
        /// Lines that decode but belong to no complete append: they precede an append whose
        /// checksum matches and were not part of it (an append that does not match its own
        /// checksum). Offset and length, newline included; not applied.
        var setAside: [(offset: Int, length: Int)] = []
        /// Whether lines (in `setAside` or `bad`) precede an append whose checksum matches
        /// and were not part of it.
        var orphaned = false
    }

    /// Reads journal lines from `count` bytes at `base`.
    ///
    /// Lines are applied an append at a time: the last line of every append carries
    /// `"end":true`, and only lines followed by such a line are complete. An append holds
    /// one or more whole commits (consecutive lines with the same `seq`); a failed or
    /// interrupted append has no `end` at its end, so none of it is ever applied. Anything
    /// after the last `end` line is left unconsumed.
    ///
    /// An `end` line with a checksum ends its append only when the checksum matches the
    /// append's bytes: otherwise part of the append is missing (it is being written in
    /// place, or was damaged), and its lines stay pending like those of an unfinished
    /// append. Pending lines before the first byte of an append whose checksum matches
    /// belong to no complete append: they are listed in ``JournalScan/setAside`` (or
    /// ``JournalScan/bad`` when they do not decode), and ``JournalScan/orphaned`` is set, since a reader that did not hold the writers' lock
    /// may have read them while they were written (see `readJournal`).
    ///
    /// Sequence numbers only grow: a commit whose number is not above `sequence` (what the
    /// reader has applied already) and every earlier commit of the stretch is listed in
    /// ``JournalScan/repeated`` instead of ``JournalScan/commits``.
    ///
    /// The commits' fields are copied out of `base`, into a few large buffers, spilled to
    /// `spill` when there is one (see ``FieldsSpill``).
    static func scanJournal(
        _ base: UnsafePointer<UInt8>, count: Int, after sequence: Int, parser: inout LineParser,
        spill: FieldsSpill.Target? = nil
    ) -> JournalScan {
        var scan = JournalScan()
        // The lines read since the last complete append, each with its offset and end.
        var pending: [PendingLine] = []
        // The fields of the commits' records, in order, gathered into a few buffers at the
        // end, as a snapshot's.
        var fields: [LineParser.FieldsBytes?] = []
        var pendingBad: [(offset: Int, length: Int)] = []
        var highest = sequence
        // The end of the last `end` line whose checksum did not match: an append that ends
        // without a checksum (written by an older version) does not take in its lines.
        var unmatchedEnd = 0
        var start = 0
        while start < count {
            guard let found = memchr(base + start, 0x0A, count - start) else { break }
            let newline = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
            defer { start = newline + 1 }
            if isBlank(base, start, newline) { continue }
            guard let (entry, entryFields) = parser.parseJournalLine(
                base, start: start, end: newline, deferringFields: true)
            else {
                pendingBad.append((start, newline + 1 - start))
                continue
            }
            pending.append(PendingLine(entry: entry, fields: entryFields, start: start, end: newline + 1))
            guard entry.isLast else { continue }
            var appendStart = max(scan.consumed, unmatchedEnd)
            if let seal = entry.seal {
                // `prior` counts from the line's `{` (blanks before it are the previous
                // append's, or a hole).
                var lineStart = start
                while base[lineStart] != UInt8(ascii: "{") { lineStart += 1 }
                appendStart = lineStart - seal.prior
                guard appendStart >= scan.consumed,
                      appendChecksum(base + appendStart, count: newline + 1 - appendStart,
                                     sumAt: seal.sumOffset - appendStart) == seal.sum
                else {
                    unmatchedEnd = newline + 1
                    continue
                }
            }
            // Lines before the append's first byte were not part of it.
            var firstOwn = pending.firstIndex { $0.start >= appendStart } ?? pending.count
            let straddled = (firstOwn > 0 && pending[firstOwn - 1].end > appendStart)
                || pendingBad.contains { $0.offset < appendStart && $0.offset + $0.length > appendStart }
            if straddled {
                // The append starts inside a line as read: the newline before it was lost
                // (in a hole of the append before). Its own lines are read again from its
                // first byte, and the bytes before it are set aside.
                let own = lines(base, from: appendStart, to: newline + 1, parser: &parser)
                pending.removeSubrange(firstOwn...)
                // The line cut at the append's first byte keeps what precedes it, unless that
                // is blank (the hole's spaces).
                if firstOwn > 0, pending[firstOwn - 1].end > appendStart {
                    pending[firstOwn - 1].end = appendStart
                    if isBlank(base, pending[firstOwn - 1].start, appendStart) { pending.remove(at: firstOwn - 1) }
                }
                for index in pendingBad.indices where pendingBad[index].offset < appendStart {
                    pendingBad[index].length = min(pendingBad[index].length, appendStart - pendingBad[index].offset)
                }
                pendingBad.removeAll { $0.offset >= appendStart || isBlank(base, $0.offset, $0.offset + $0.length) }
                pendingBad.append(contentsOf: own.bad)
                pending.append(contentsOf: own.lines)
                firstOwn = pending.count - own.lines.count
            }
            if firstOwn > 0 || pendingBad.contains(where: { $0.offset < appendStart }) {
                scan.orphaned = true
            }
            scan.setAside.append(contentsOf: pending[..<firstOwn].map { ($0.start, $0.end - $0.start) })
            // Consecutive lines with the same `seq` make one commit.
            var commitStart = firstOwn
            while commitStart < pending.count {
                let commitSequence = pending[commitStart].entry.sequence
                var commitEnd = commitStart + 1
                while commitEnd < pending.count, pending[commitEnd].entry.sequence == commitSequence {
                    commitEnd += 1
                }
                if commitSequence > highest {
                    highest = commitSequence
                    scan.commits.append((commitSequence, pending[commitStart..<commitEnd].map(\.entry.record)))
                    fields.append(contentsOf: pending[commitStart..<commitEnd].lazy.map(\.fields))
                } else {
                    let from = pending[commitStart].start
                    scan.repeated.append((from, pending[commitEnd - 1].end - from, commitSequence))
                }
                commitStart = commitEnd
            }
            pending.removeAll(keepingCapacity: true)
            scan.consumed = newline + 1
            scan.bad.append(contentsOf: pendingBad)
            pendingBad.removeAll()
        }
        var slices = pooledFields(fields, from: base, spill: spill.map(FieldsSpill.init)).makeIterator()
        for commit in scan.commits.indices {
            for record in scan.commits[commit].records.indices {
                scan.commits[commit].records[record].fields = slices.next()!
            }
        }
        return scan
    }

    /// The lines from `start` to `end` (which ends with a newline), decoded, and those that
    /// do not decode.
    private static func lines(
        _ base: UnsafePointer<UInt8>, from start: Int, to end: Int, parser: inout LineParser
    ) -> (lines: [PendingLine], bad: [(offset: Int, length: Int)]) {
        var result: (lines: [PendingLine], bad: [(offset: Int, length: Int)]) = ([], [])
        var lineStart = start
        while lineStart < end {
            let newline = UnsafePointer<UInt8>(
                memchr(base + lineStart, 0x0A, end - lineStart)!.assumingMemoryBound(to: UInt8.self)) - base
            defer { lineStart = newline + 1 }
            if isBlank(base, lineStart, newline) { continue }
            if let (entry, fields) = parser.parseJournalLine(base, start: lineStart, end: newline, deferringFields: true) {
                result.lines.append(PendingLine(entry: entry, fields: fields, start: lineStart, end: newline + 1))
            } else {
                result.bad.append((lineStart, newline + 1 - lineStart))
            }
        }
        return result
    }

    /// A decoded journal line not yet part of a complete append: where it is (`end` past
    /// its newline) and its fields' bytes.
    private struct PendingLine {
        var entry: JournalEntry
        var fields: LineParser.FieldsBytes?
        var start: Int
        var end: Int
    }

    /// The byte a journal's reserved tail is made of: a space, so that a journal with one
    /// is still JSON text (`jq`, `cat`).
    static let reservedByte = UInt8(ascii: " ")

    /// How many bytes a writer reserves past its append when the append would grow the
    /// journal: the appends that follow overwrite reserved bytes instead of growing the
    /// file, so their flush writes data only, not the file's new size as well.
    static let journalReserve = 16 * 1024

    /// The end of the data in `count` bytes of journal: the offset past the last byte that
    /// is not a space (`count` when the stretch does not end in spaces).
    ///
    /// What follows is a reserved tail: spaces that a writer put ahead of the data and that
    /// the next appends overwrite. Journal lines never end in a space (each ends with `}`
    /// and a newline), so a run of spaces at the end is never part of a complete append.
    static func dataEnd(_ base: UnsafePointer<UInt8>, count: Int) -> Int {
        var end = count
        // Eight bytes at a time: a reserved tail is thousands of spaces.
        let eightSpaces = UInt64(0x2020_2020_2020_2020)
        while end >= 8, UnsafeRawPointer(base + end - 8).loadUnaligned(as: UInt64.self) == eightSpaces {
            end -= 8
        }
        while end > 0, base[end - 1] == reservedByte { end -= 1 }
        return end
    }

    /// The number of bytes a damaged tail holds that are not blank: from its first byte that
    /// is not a space, tab, newline, carriage return or NUL to its last one. The spaces a
    /// writer reserved, before or after them, are not counted, so 16 bytes of garbage after
    /// a reserved tail are reported as 16, not as the size of the reservation.
    package static func writtenByteCount(_ bytes: some BidirectionalCollection<UInt8>) -> Int {
        func isBlank(_ byte: UInt8) -> Bool { [0x20, 0x09, 0x0A, 0x0D, 0x00].contains(byte) }
        guard let first = bytes.firstIndex(where: { !isBlank($0) }),
              let last = bytes.lastIndex(where: { !isBlank($0) })
        else { return 0 }
        return bytes.distance(from: first, to: last) + 1
    }

    /// Whether the bytes from `start` to `end` are spaces, tabs and carriage returns only.
    static func isBlank(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        var index = start
        while index < end {
            switch base[index] {
            case 0x20, 0x09, 0x0D: index += 1
            default: return false
            }
        }
        return true
    }
}
