import Foundation

/// The explicit upgrade of a JSON-file database to the format this version creates, for the
/// `mirror-db upgrade` tool: `database.json` is rewritten (see
/// `JSONFileEngine.upgradeDatabaseFile`), nothing else. There is no public API for it: an
/// upgrade makes every process of a version from before append checksums refuse the
/// database, so it is a step a person takes once those processes are stopped.
package enum JSONFileUpgrade {
    /// The format a database was in, and the one it is in now.
    package struct Result: Sendable {
        package var identifier: String
        package var from: Int
        package var to: Int
    }

    /// Rewrites the `database.json` of the database in `root` in the format this version
    /// creates, atomically (a new file flushed, renamed over it, the directory flushed).
    ///
    /// - Throws: ``MirrorError/Kind/notFound`` when `root` is no database directory;
    ///   ``MirrorError/Kind/unsupported`` when the database is in that format already;
    ///   ``MirrorError/Kind/unsupportedFormat`` or ``MirrorError/Kind/corruptEntry`` when its
    ///   `database.json` cannot be read. Nothing is changed then.
    package static func upgrade(directory root: String) throws(MirrorError) -> Result {
        let rootFD = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootFD >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR {
                throw MirrorError(.notFound, "\(root): no such directory. Nothing was changed.", file: root)
            }
            throw MirrorError.posix(code, "open", file: root)
        }
        defer { close(rootFD) }
        let old = try JSONFileEngine.upgradeDatabaseFile(rootFD: rootFD, rootPath: root, fileSystem: .live)
        return Result(identifier: old.identifier, from: old.format, to: JSONFileFormat.databaseFormat)
    }
}
