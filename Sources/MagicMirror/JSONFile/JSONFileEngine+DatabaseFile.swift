import Foundation

/// `database.json`, the file that makes a directory a database: its format version and
/// identifier, created once (atomically, even with several processes racing), and rewritten
/// in a later format only by an explicit upgrade (`mirror-db upgrade`).
extension JSONFileEngine {
    /// What `database.json` says.
    struct DatabaseFile: Equatable {
        /// The database format (see ``JSONFileFormat/readableDatabaseFormats``).
        var format: Int
        /// ``RecordDatabase/identifier``.
        var identifier: String
        /// When the database was created (ISO 8601), for people; `nil` when the file has none.
        var created: String?

        /// Whether journal appends reserve space past themselves and are later written over
        /// it in place (format 2 and later). In format 1, processes of versions from before
        /// append checksums may share the database: they would apply an append written in
        /// place in part, so every append goes at the end of the file.
        var reservesJournalSpace: Bool { format >= 2 }

        /// The file's bytes: one line, `format`, `identifier`, then `created`.
        var bytes: [UInt8] {
            var writer = JSONByteWriter()
            writer.append("{\"format\":")
            writer.append(format)
            writer.append(",\"identifier\":")
            writer.append(string: identifier)
            if let created {
                writer.append(",\"created\":")
                writer.append(string: created)
            }
            writer.append("}\n")
            return writer.bytes
        }
    }

    /// Reads `database.json`, creating the file (atomically, once, even with several
    /// processes racing) in ``JSONFileFormat/databaseFormat`` when it does not exist.
    static func databaseFile(
        rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> DatabaseFile {
        let name = JSONFileFormat.databaseFile
        let filePath = rootPath + "/" + name
        for _ in 0..<10 {
            if let file = try readDatabaseFile(rootFD: rootFD, rootPath: rootPath, fileSystem: fileSystem) {
                return file
            }
            let file = DatabaseFile(
                format: JSONFileFormat.databaseFormat, identifier: UUID().uuidString,
                created: ISO8601DateFormatter().string(from: Date()))
            let temporary = try writeTemporary(file, rootFD: rootFD, rootPath: rootPath, fileSystem: fileSystem)
            defer { try? fileSystem.unlink(at: rootFD, temporary) }
            do {
                // link() fails if another process created the file first: then read theirs.
                try fileSystem.link(at: rootFD, temporary, to: name)
            } catch {
                if error.code == EEXIST { continue }
                if error.code == EPERM || error.code == ENOTSUP || error.code == EOPNOTSUPP {
                    // No hard links on this file system: fall back to a rename, unless
                    // another process created the file meanwhile.
                    if JSONFileIO.info(at: rootFD, name) != nil { continue }
                    do {
                        try fileSystem.rename(at: rootFD, temporary, to: name)
                    } catch {
                        throw error.mirrorError(file: filePath)
                    }
                } else {
                    throw error.mirrorError(file: filePath)
                }
            }
            try? fileSystem.sync(rootFD, metadata: true)
        }
        throw MirrorError(.ioFailure, "cannot create \(filePath)", file: filePath)
    }

    /// Rewrites `database.json` in ``JSONFileFormat/databaseFormat``, keeping its identifier
    /// and creation date: a new file is written, flushed, renamed over it, and the directory
    /// flushed, so that every process that opens the database reads either the old file or
    /// the new one. Processes that opened it before keep the format they read.
    ///
    /// - Returns: The file as it was.
    /// - Throws: ``MirrorError/Kind/notFound`` when the directory has no `database.json`
    ///   (not a database); the errors of reading it (``MirrorError/Kind/unsupportedFormat``,
    ///   ``MirrorError/Kind/corruptEntry``); ``MirrorError/Kind/unsupported`` when it is in
    ///   ``JSONFileFormat/databaseFormat`` already. Nothing is changed then.
    static func upgradeDatabaseFile(
        rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> DatabaseFile {
        let name = JSONFileFormat.databaseFile
        let filePath = rootPath + "/" + name
        guard let old = try readDatabaseFile(rootFD: rootFD, rootPath: rootPath, fileSystem: fileSystem) else {
            throw MirrorError(
                .notFound, "\(rootPath) is not a MagicMirror database: it has no \(name). Nothing was changed.",
                file: filePath)
        }
        guard old.format < JSONFileFormat.databaseFormat else {
            throw MirrorError(
                .unsupported,
                "\(filePath) is in format \(old.format) already; there is nothing to upgrade. Nothing was changed.",
                file: filePath)
        }
        var upgraded = old
        upgraded.format = JSONFileFormat.databaseFormat
        let mode = JSONFileIO.info(at: rootFD, name)?.mode
        let temporary = try writeTemporary(
            upgraded, mode: mode, rootFD: rootFD, rootPath: rootPath, fileSystem: fileSystem)
        do {
            try fileSystem.rename(at: rootFD, temporary, to: name)
        } catch {
            try? fileSystem.unlink(at: rootFD, temporary)
            throw error.mirrorError(file: filePath)
        }
        do {
            try fileSystem.sync(rootFD, metadata: true)
        } catch {
            throw error.mirrorError(file: rootPath)
        }
        return old
    }

    /// The contents of `database.json`, or `nil` when there is no such file.
    private static func readDatabaseFile(
        rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> DatabaseFile? {
        let filePath = rootPath + "/" + JSONFileFormat.databaseFile
        do {
            let fd = try fileSystem.open(at: rootFD, JSONFileFormat.databaseFile, flags: O_RDONLY | O_NOFOLLOW)
            defer { close(fd) }
            let bytes = try JSONFileIO.readAll(fd)
            return try databaseFile(in: bytes, file: filePath)
        } catch let failure as FileSystem.Failure where failure.code == ENOENT {
            return nil
        } catch let failure as FileSystem.Failure {
            throw failure.mirrorError(file: filePath)
        } catch let error as MirrorError {
            throw error
        } catch {
            throw MirrorError(.ioFailure, "cannot read \(filePath)", file: filePath, underlying: error)
        }
    }

    /// Writes `file` to a new temporary file of the root directory and flushes it.
    ///
    /// - Parameter mode: The new file's mode; the umask's when `nil`.
    /// - Returns: The temporary file's name.
    private static func writeTemporary(
        _ file: DatabaseFile, mode: mode_t? = nil, rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> String {
        let temporary = "\(JSONFileFormat.databaseFile).tmp-\(getpid())-\(UUID().uuidString.prefix(8))"
        do {
            let fd = try fileSystem.open(
                at: rootFD, temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o666)
            defer { close(fd) }
            if let mode { try fileSystem.changeMode(fd, to: mode) }
            try fileSystem.write(fd, bytes: file.bytes)
            try fileSystem.sync(fd)
        } catch {
            try? fileSystem.unlink(at: rootFD, temporary)
            // Named after the file being made, not the temporary one it is written to first.
            let filePath = rootPath + "/" + JSONFileFormat.databaseFile
            var failure = error.mirrorError(file: filePath)
            failure.message = "cannot create \(JSONFileFormat.databaseFile), which makes \(rootPath) a database: "
                + String(cString: strerror(error.code))
                + (error.code == EACCES || error.code == EROFS ? " (the directory is read-only for this process)" : "")
            throw failure
        }
        return temporary
    }

    /// What the bytes of `database.json` say.
    ///
    /// - Throws: ``MirrorError/Kind/corruptEntry`` when they are not such a file,
    ///   ``MirrorError/Kind/unsupportedFormat`` for a format this version does not read.
    static func databaseFile(in bytes: [UInt8], file: String) throws(MirrorError) -> DatabaseFile {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            throw MirrorError(
                .corruptEntry,
                "\(file) is not a JSON object; it names the database's format and identifier. "
                    + "Restore it, or remove it to give the database a new identifier. Nothing was changed.",
                file: file)
        }
        guard let format = object["format"] as? Int else {
            throw MirrorError(.corruptEntry, "\(file) has no format version. Nothing was changed.", file: file)
        }
        let readable = JSONFileFormat.readableDatabaseFormats
        guard readable.contains(format) else {
            throw MirrorError(
                .unsupportedFormat,
                "\(file) is in format \(format); this version of MagicMirror reads formats "
                    + readable.map(String.init).joined(separator: " and ") + " only. Nothing was changed.",
                file: file)
        }
        guard let identifier = object["identifier"] as? String, !identifier.isEmpty else {
            throw MirrorError(.corruptEntry, "\(file) has no identifier. Nothing was changed.", file: file)
        }
        return DatabaseFile(format: format, identifier: identifier, created: object["created"] as? String)
    }
}
