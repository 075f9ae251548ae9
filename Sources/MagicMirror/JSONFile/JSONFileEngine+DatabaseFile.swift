import Foundation

/// `database.json`, the file that makes a directory a database: its format version and
/// identifier, created once (atomically, even with several processes racing).
extension JSONFileEngine {
    /// Reads the database's identifier from `database.json`, creating the file (atomically,
    /// once, even with several processes racing) when it does not exist.
    static func databaseIdentifier(
        rootFD: Int32, rootPath: String, fileSystem: FileSystem
    ) throws(MirrorError) -> String {
        let name = JSONFileFormat.databaseFile
        let filePath = rootPath + "/" + name
        for _ in 0..<10 {
            do {
                let fd = try fileSystem.open(at: rootFD, name, flags: O_RDONLY | O_NOFOLLOW)
                defer { close(fd) }
                let bytes = try JSONFileIO.readAll(fd)
                return try identifier(in: bytes, file: filePath)
            } catch let failure as FileSystem.Failure where failure.code == ENOENT {
                // Create it below.
            } catch let failure as FileSystem.Failure {
                throw failure.mirrorError(file: filePath)
            } catch let error as MirrorError {
                throw error
            } catch {
                throw MirrorError(.ioFailure, "cannot read \(filePath)", file: filePath, underlying: error)
            }
            let temporary = "\(name).tmp-\(getpid())-\(UUID().uuidString.prefix(8))"
            let created = ISO8601DateFormatter().string(from: Date())
            let text = "{\"format\":\(JSONFileFormat.version),\"identifier\":\"\(UUID().uuidString)\","
                + "\"created\":\"\(created)\"}\n"
            do {
                let fd = try fileSystem.open(
                    at: rootFD, temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o666)
                defer { close(fd) }
                try fileSystem.write(fd, bytes: Array(text.utf8))
                try fileSystem.sync(fd)
            } catch {
                try? fileSystem.unlink(at: rootFD, temporary)
                throw error.mirrorError(file: rootPath + "/" + temporary)
            }
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

    /// The identifier in the bytes of `database.json`.
    static func identifier(in bytes: [UInt8], file: String) throws(MirrorError) -> String {
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
        guard format == JSONFileFormat.version else {
            throw MirrorError(
                .unsupportedFormat,
                "\(file) is in format \(format); this version of MagicMirror reads format "
                    + "\(JSONFileFormat.version) only. Nothing was changed.",
                file: file)
        }
        guard let identifier = object["identifier"] as? String, !identifier.isEmpty else {
            throw MirrorError(.corruptEntry, "\(file) has no identifier. Nothing was changed.", file: file)
        }
        return identifier
    }
}
