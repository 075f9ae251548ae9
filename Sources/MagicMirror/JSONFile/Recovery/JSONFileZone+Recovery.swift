import Foundation

/// Recovery from damaged files: what follows the last complete append (a writer that
/// died) is cut off, and bytes that cannot be used are kept in a quarantine file and
/// reported once; everything else is loaded.
extension JSONFileZone {
    /// Cuts what follows the last complete append (under the writers' lock only): the
    /// bytes of an unfinished append are kept in quarantine, the reserved tail goes with
    /// them (the next append reserves again).
    func cutTail(_ disk: inout Disk) throws(MirrorError) {
        guard disk.journalSeen > disk.journalEnd, disk.journalFD >= 0 else { return }
        let name = JSONFileFormat.journalFile(disk.generation)
        // Only a writer that holds the lock named `lock` may cut: what follows the last
        // complete append may be another writer's append in progress otherwise.
        try requireLockStillNamed(disk)
        let tail = (try? JSONFileIO.read(disk.journalFD, from: disk.journalEnd, count: disk.journalSeen - disk.journalEnd)) ?? []
        let stamp = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            .description + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        quarantine(
            tail, in: disk.directoryFD, name: "quarantine-journal-\(disk.generation)-\(disk.journalEnd)-\(stamp).torn",
            source: name,
            what: "\(JSONFileInspection.bytesText(JSONFileFormat.writtenByteCount(tail))) after the last complete append "
                + "of \(name) (an unfinished write, or one that does not match its checksum) were cut off"
                + (JSONFileFormat.writtenByteCount(tail) < tail.count ? ", with the space reserved for appends" : ""))
        do {
            try fileSystem.truncate(disk.journalFD, to: disk.journalEnd)
        } catch {
            throw located(error.mirrorError(file: path(name)))
        }
        disk.journalSeen = disk.journalEnd
        disk.journalSize = disk.journalEnd
    }

    /// Keeps bytes that cannot be used in a quarantine file of the zone, once, and reports
    /// them once per engine.
    ///
    /// - Parameters:
    ///   - name: The quarantine file's name; deterministic for entries that stay in place
    ///     (so reloading does not copy them again), unique for cut tails.
    ///   - source: The file the bytes came from.
    func quarantine(
        _ bytes: [UInt8], in directoryFD: Int32, name: String, source: String, what: String
    ) {
        let key = path(name)
        guard !context.problems.wasReported(key) else { return }
        var note = ""
        do {
            let fd = try fileSystem.open(
                at: directoryFD, name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: fileMode)
            defer { close(fd) }
            try fileSystem.write(fd, bytes: bytes)
            try fileSystem.sync(fd)
        } catch {
            if error.code != EEXIST { note = " (could not be written: \(String(cString: strerror(error.code))))" }
        }
        let recordID = Self.likelyRecordID(in: bytes)
        let error = MirrorError(
            .corruptEntry,
            "\(what); its bytes were kept in \(key)\(note) and everything else was loaded",
            recordIDs: recordID.map { [$0] } ?? [],
            recordType: zone.recordType, scope: zone.scope, file: path(source))
        context.problems.report(error, key: key)
    }

    /// The value of an `"id"` key in a damaged line, when one can be seen.
    static func likelyRecordID(in bytes: [UInt8]) -> String? {
        let marker = Array("\"id\":\"".utf8)
        guard bytes.count > marker.count else { return nil }
        var index = 0
        while index + marker.count <= bytes.count {
            if bytes[index..<(index + marker.count)].elementsEqual(marker) {
                let start = index + marker.count
                guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")), end > start else { return nil }
                let id = String(decoding: bytes[start..<end], as: UTF8.self)
                return NameRules.problem(with: id) == nil ? id : nil
            }
            index += 1
        }
        return nil
    }
}
