import Foundation

/// Reading journals: lines grouped into commits and appends, with the bad lines and the
/// repeated sequence numbers set apart.
extension JSONFileFormat {
    /// One decoded journal line.
    struct JournalEntry {
        var sequence: Int
        var record: StoredRecord
        var isLast: Bool
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
    }

    /// Reads journal lines from `count` bytes at `base`.
    ///
    /// Lines are applied an append at a time: the last line of every append carries
    /// `"end":true`, and only lines followed by such a line are complete. An append holds
    /// one or more whole commits (consecutive lines with the same `seq`); a failed or
    /// interrupted append has no `end` at its end, so none of it is ever applied. Anything
    /// after the last `end` line is left unconsumed.
    ///
    /// Sequence numbers only grow: a commit whose number is not above `sequence` (what the
    /// reader has applied already) and every earlier commit of the stretch is listed in
    /// ``JournalScan/repeated`` instead of ``JournalScan/commits``.
    static func scanJournal(
        _ base: UnsafePointer<UInt8>, count: Int, after sequence: Int, parser: inout LineParser
    ) -> JournalScan {
        var scan = JournalScan()
        var pending: [(sequence: Int, records: [StoredRecord], fields: [LineParser.FieldsBytes?], start: Int, end: Int)] = []
        // The fields of the commits' records, in order, gathered into one buffer at the end
        // (one allocation for all, as a snapshot's).
        var fields: [LineParser.FieldsBytes?] = []
        var pendingBad: [(offset: Int, length: Int)] = []
        var highest = sequence
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
            // Only the sequence number is read from the last pending commit: a copy of the
            // element would share its records' storage, and each append would then copy them
            // all (quadratic in the size of a commit).
            if !pending.isEmpty, pending[pending.count - 1].sequence == entry.sequence {
                pending[pending.count - 1].records.append(entry.record)
                pending[pending.count - 1].fields.append(entryFields)
                pending[pending.count - 1].end = newline + 1
            } else {
                pending.append((entry.sequence, [entry.record], [entryFields], start, newline + 1))
            }
            if entry.isLast {
                for commit in pending {
                    if commit.sequence > highest {
                        highest = commit.sequence
                        scan.commits.append((commit.sequence, commit.records))
                        fields.append(contentsOf: commit.fields)
                    } else {
                        scan.repeated.append((commit.start, commit.end - commit.start, commit.sequence))
                    }
                }
                pending.removeAll()
                scan.consumed = newline + 1
                scan.bad.append(contentsOf: pendingBad)
                pendingBad.removeAll()
            }
        }
        var slices = sharedFields(fields, from: base).makeIterator()
        for commit in scan.commits.indices {
            for record in scan.commits[commit].records.indices {
                scan.commits[commit].records[record].fields = slices.next()!
            }
        }
        return scan
    }

    /// The byte of a tail of spaces after a journal's data (JSON white space), which
    /// readers skip and writers cut before they append. Versions of this library that
    /// reserved journal space wrote such tails; none writes them now (see the format
    /// article, "Spaces after the data").
    static let reservedByte = UInt8(ascii: " ")

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
