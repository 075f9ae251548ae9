import Foundation

/// A read-only look at the files of a JSON-file database, for the `mirror-db` tool: what a
/// zone holds, its history, and every problem the engine's recovery on open would report or
/// repair, found with the engine's own parsers (``JSONFileFormat``) and never writing a
/// byte.
package enum JSONFileInspection {
    /// One zone's files, read.
    package struct Zone: Sendable {
        package var id: ZoneID
        /// The zone's directory.
        package var path: String
        /// The generation and sequence of `snapshot.json`, when it has a readable header.
        package var snapshotHeader: (generation: Int, sequence: Int)?
        package var snapshotBytes = 0
        /// The current generation's journal: the size of its data (without the spaces reserved
        /// at its end) and its complete commits, in order.
        package var journalBytes = 0
        package var generation = 0
        package var history: [Commit] = []
        /// The records as a mirror would load them, deleted ones included (as tombstones).
        package var records: [StoredRecord] = []
        /// Files named `quarantine-…` in the zone's directory.
        package var quarantine: [String] = []
        package var problems: [Problem] = []

        /// The records that are not deleted, in creation order.
        package var liveRecords: [StoredRecord] {
            records.filter { !$0.isDeleted }.sorted { ($0.created, $0.id) < ($1.created, $1.id) }
        }
    }

    /// One committed change of the journal.
    package struct Commit: Sendable {
        package var sequence: Int
        package var records: [StoredRecord]
    }

    /// Something recovery would report, or repair, on open.
    package struct Problem: Sendable, CustomStringConvertible {
        /// What it is: `bad-line`, `damaged-append`, `repeated-sequence`, `torn-tail`, `bad-snapshot-line`,
        /// `unsupported-format`, `missing-snapshot`, `unreadable`, `database-file`,
        /// `invalid-name`, `symbolic-link`, `stale-temporary`.
        package var kind: String
        package var file: String
        /// The byte offset in `file`, when the problem is at one place.
        package var offset: Int?
        package var message: String

        package var description: String {
            offset.map { "\(file) at byte \($0): \(message)" } ?? "\(file): \(message)"
        }
    }

    /// What `database.json` says is wrong with it, or `nil` when it is sound.
    package static func checkDatabaseFile(in root: String) -> Problem? {
        readDatabaseFile(in: root).problem
    }

    /// The database format `database.json` names (see the format article's "Formats 1 and
    /// 2"), or `nil` when it cannot be read (``checkDatabaseFile(in:)`` says why).
    package static func databaseFormat(in root: String) -> Int? {
        readDatabaseFile(in: root).file?.format
    }

    /// `database.json`, read, or what is wrong with it.
    private static func readDatabaseFile(in root: String) -> (file: JSONFileEngine.DatabaseFile?, problem: Problem?) {
        let file = root + "/" + JSONFileFormat.databaseFile
        guard let data = FileManager.default.contents(atPath: file) else {
            return (nil, Problem(kind: "database-file", file: file, message: "missing or unreadable (a first open creates it)"))
        }
        do throws(MirrorError) {
            return (try JSONFileEngine.databaseFile(in: Array(data), file: file), nil)
        } catch {
            return (nil, Problem(kind: "database-file", file: file, message: error.message))
        }
    }

    /// The zones of the database in `root`: `public/<type>` and `private/<user>/<type>`,
    /// with problems for names that are not valid and for symbolic links, which the engine
    /// never follows.
    package static func zones(in root: String) -> (zones: [(ZoneID, String)], problems: [Problem]) {
        var zones: [(ZoneID, String)] = []
        var problems: [Problem] = []
        func entries(_ path: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
        }
        func isDirectory(_ path: String) -> Bool {
            var info = stat()
            guard lstat(path, &info) == 0 else { return false }
            if (info.st_mode & S_IFMT) == S_IFLNK {
                problems.append(Problem(
                    kind: "symbolic-link", file: path, message: "a symbolic link; MagicMirror does not follow it"))
                return false
            }
            return (info.st_mode & S_IFMT) == S_IFDIR
        }
        func validName(_ name: String, _ path: String) -> Bool {
            guard let problem = NameRules.problem(with: name) else { return true }
            problems.append(Problem(kind: "invalid-name", file: path, message: "\(problem); not a zone"))
            return false
        }
        let publicPath = root + "/" + JSONFileFormat.publicDirectory
        if isDirectory(publicPath) {
            for type in entries(publicPath) where isDirectory(publicPath + "/" + type) {
                if validName(type, publicPath + "/" + type) { zones.append((.public(type), publicPath + "/" + type)) }
            }
        }
        // A user's zones: private ones, and the shares to them (shared/<user>/<type>).
        for scope in [Scope.private, .shared] {
            let usersPath = root + "/" + (scope == .private ? JSONFileFormat.privateDirectory : JSONFileFormat.sharedDirectory)
            guard isDirectory(usersPath) else { continue }
            for user in entries(usersPath) where isDirectory(usersPath + "/" + user) {
                guard validName(user, usersPath + "/" + user) else { continue }
                for type in entries(usersPath + "/" + user) where isDirectory(usersPath + "/" + user + "/" + type) {
                    let path = usersPath + "/" + user + "/" + type
                    if validName(type, path), let zone = try? ZoneID(type, scope: scope, user: user) {
                        zones.append((zone, path))
                    }
                }
            }
        }
        return (zones, problems)
    }

    /// Reads one zone's directory as the engine's recovery on open does, without changing it.
    package static func inspect(_ id: ZoneID, at path: String) -> Zone {
        var zone = Zone(id: id, path: path)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
        zone.quarantine = names.filter { $0.hasPrefix("quarantine-") }
        if names.contains(JSONFileFormat.snapshotTemporaryFile) {
            zone.problems.append(Problem(
                kind: "stale-temporary", file: path + "/" + JSONFileFormat.snapshotTemporaryFile,
                message: "left by a compaction that stopped before its rename; removed on the next compaction"))
        }

        // The snapshot.
        let snapshotPath = path + "/" + JSONFileFormat.snapshotFile
        var contents = JSONFileFormat.SnapshotContents(header: (0, 0))
        var hasSnapshot = false
        if let bytes = read(snapshotPath, into: &zone) {
            hasSnapshot = true
            zone.snapshotBytes = bytes.count
            switch JSONFileFormat.parseSnapshot(bytes) {
            case .success(let value):
                contents = value
            case .failure(.unsupportedFormat(let format)):
                zone.problems.append(Problem(
                    kind: "unsupported-format", file: snapshotPath,
                    message: "format \(format); this version reads format \(JSONFileFormat.version) only"))
                return zone
            }
            for bad in contents.bad {
                zone.problems.append(Problem(
                    kind: "bad-snapshot-line", file: snapshotPath, offset: bad.offset,
                    message: bad.offset == 0 ? "the header line does not decode" : "a line does not decode"))
            }
        }
        zone.snapshotHeader = contents.header

        // The generation, as the engine infers it.
        let generations = names.compactMap(JSONFileFormat.generation(ofJournal:))
        if hasSnapshot, let header = contents.header {
            zone.generation = header.generation
        } else {
            zone.generation = JSONFileFormat.inferredGeneration(journalSizes: generations.map {
                ($0, fileSize(path + "/" + JSONFileFormat.journalFile($0)))
            })
        }
        if !hasSnapshot && zone.generation > 0 {
            zone.problems.append(Problem(
                kind: "missing-snapshot", file: snapshotPath,
                message: "missing although the zone was compacted; only the journal's changes are loaded"))
        }

        // The journal.
        var state = ZoneState(
            generation: zone.generation, sequence: contents.header?.sequence ?? 0, records: contents.records)
        let journalName = JSONFileFormat.journalFile(zone.generation)
        let journalPath = path + "/" + journalName
        if let bytes = read(journalPath, into: &zone), !bytes.isEmpty {
            zone.journalBytes = JSONFileZone.withoutReservedTail(bytes).count
            var parser = JSONFileFormat.LineParser()
            let scan = bytes.withUnsafeBufferPointer { buffer in
                JSONFileFormat.scanJournal(
                    buffer.baseAddress!, count: buffer.count, after: state.token.sequence, parser: &parser)
            }
            for bad in scan.bad {
                zone.problems.append(Problem(
                    kind: "bad-line", file: journalPath, offset: bad.offset,
                    message: "a line does not decode; recovery keeps it in a quarantine file and skips it"))
            }
            for line in scan.setAside {
                zone.problems.append(Problem(
                    kind: "damaged-append", file: journalPath, offset: line.offset,
                    message: "a line of an append that does not match its checksum; recovery keeps it in a "
                        + "quarantine file and does not apply its commit"))
            }
            for repeated in scan.repeated {
                zone.problems.append(Problem(
                    kind: "repeated-sequence", file: journalPath, offset: repeated.offset,
                    message: "a commit repeats sequence number \(repeated.sequence); it is not applied"))
            }
            if scan.consumed < bytes.count, bytes[scan.consumed...].contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
                zone.problems.append(Problem(
                    kind: "torn-tail", file: journalPath, offset: scan.consumed,
                    message: "\(Self.bytesText(JSONFileFormat.writtenByteCount(bytes[scan.consumed...]))) after the last "
                        + "complete append (an unfinished write, one in progress, or one that does not match its "
                        + "checksum); the next writer cuts them into a quarantine file"))
            }
            for commit in scan.commits {
                state.apply(commit.records, sequence: commit.sequence)
                zone.history.append(Commit(sequence: commit.sequence, records: commit.records))
            }
        }
        zone.records = Array(state.records.values)
        return zone
    }

    /// The bytes of a file, without following a symbolic link; `nil` when it does not exist
    /// (any other failure is a problem of `zone`).
    private static func read(_ path: String, into zone: inout Zone) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno != ENOENT {
                zone.problems.append(Problem(
                    kind: errno == ELOOP ? "symbolic-link" : "unreadable", file: path,
                    message: String(cString: strerror(errno))))
            }
            return nil
        }
        defer { close(fd) }
        do {
            return try JSONFileIO.readAll(fd)
        } catch {
            zone.problems.append(Problem(kind: "unreadable", file: path, message: String(cString: strerror(error.code))))
            return nil
        }
    }

    private static func fileSize(_ path: String) -> Int {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}

extension JSONFileInspection {
    /// `1 byte`, `16 bytes`.
    package static func bytesText(_ count: Int) -> String { count == 1 ? "1 byte" : "\(count) bytes" }
}
