import Foundation

/// The redo record of a linked commit (`intent.ndjson` in its scope space's directory):
/// every zone's batch, written and flushed before the first zone is appended to, removed
/// after the last. A writer that finds it left behind replays it (see
/// `JSONFileEngine+LinkedCommit.swift`).
///
/// One line each, in order: a header
/// `{"format":1,"writer":…,"clock":…,"zones":N}`; per zone a line
/// `{"zone":{…},"changes":[…],"records":K}` followed by its K own records as journal lines
/// (`seq` 0); and `{"end":true}`. A file that does not read this way in full is not replayed.
struct JSONFileLinkedIntent: Sendable {
    var writer: String
    var timestamp: HLCTimestamp
    var batches: [LinkedBatch]

    private struct Header: Codable {
        var format: Int
        var writer: String
        var clock: HLCTimestamp
        var zones: Int
    }

    private struct ZoneLine: Codable {
        var zone: ZoneID
        var changes: [LinkedChange]
        var records: Int
    }

    private struct EndLine: Codable {
        var end: Bool
    }

    /// The file's bytes.
    func encoded() throws(MirrorError) -> [UInt8] {
        // Sorted keys, so that DirectJSONEncoder gives the same bytes without JSONEncoder's
        // cost per value (a cascade's zone line lists every record it deletes).
        let encoder = StoredFieldsFormat.makeEncoder()
        let direct = DirectJSONEncoder.canStandIn(for: encoder)
        var writer = JSONByteWriter(capacity: 4096)
        do {
            writer.append(raw: try encoder.encode(
                Header(format: JSONFileFormat.version, writer: self.writer, clock: timestamp, zones: batches.count)))
            writer.append("\n")
            for batch in batches {
                writer.append(raw: try DirectJSONEncoder.encode(
                    ZoneLine(zone: batch.zone, changes: batch.changes, records: batch.produced.count),
                    direct: direct, orWith: encoder))
                writer.append("\n")
                for record in batch.produced {
                    JSONFileFormat.appendJournalLine(to: &writer, sequence: 1, record: record)
                }
            }
            writer.append(raw: try encoder.encode(EndLine(end: true)))
            writer.append("\n")
        } catch {
            throw MirrorError(.encodingFailed, "cannot encode a linked commit's intent: \(error)", underlying: error)
        }
        return writer.bytes
    }

    /// Reads an intent; `nil` when the bytes are not one whole intent of zones in `space`
    /// (``ZoneID/spaceKey``), with valid names and ids.
    static func decode(_ bytes: [UInt8], space: String) -> JSONFileLinkedIntent? {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        let decoder = JSONDecoder()
        var index = 0
        func next() -> ArraySlice<UInt8>? {
            guard index < lines.count else { return nil }
            defer { index += 1 }
            return lines[index]
        }
        guard let first = next(), let header = try? decoder.decode(Header.self, from: Data(first)),
              header.format == JSONFileFormat.version, NameRules.problem(with: header.writer) == nil,
              header.zones > 0, header.zones <= lines.count
        else { return nil }
        var parser = JSONFileFormat.LineParser()
        var batches: [LinkedBatch] = []
        for _ in 0..<header.zones {
            guard let line = next(), let zoneLine = try? decoder.decode(ZoneLine.self, from: Data(line)),
                  zoneLine.zone.spaceKey == space, zoneLine.records >= 0, zoneLine.records <= lines.count,
                  zoneLine.changes.allSatisfy({ change in
                      NameRules.problem(with: change.recordID) == nil
                          && change.nullifications.allSatisfy { NameRules.problem(with: $0.targetType) == nil }
                  })
            else { return nil }
            var produced: [StoredRecord] = []
            for _ in 0..<zoneLine.records {
                guard let line = next() else { return nil }
                let entry = Array(line).withUnsafeBufferPointer { buffer in
                    parser.parseJournalLine(buffer.baseAddress!, start: 0, end: buffer.count)
                }
                guard let entry, NameRules.problem(with: entry.record.id) == nil,
                      entry.record.writer == header.writer
                else { return nil }
                produced.append(entry.record)
            }
            batches.append(LinkedBatch(
                zone: zoneLine.zone, produced: produced, changes: zoneLine.changes, writer: header.writer,
                timestamp: header.clock))
        }
        guard let last = next(), (try? decoder.decode(EndLine.self, from: Data(last)))?.end == true,
              next() == nil
        else { return nil }
        return JSONFileLinkedIntent(writer: header.writer, timestamp: header.clock, batches: batches)
    }
}
