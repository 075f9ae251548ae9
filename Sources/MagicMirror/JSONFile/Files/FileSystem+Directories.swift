import Foundation

extension FileSystem {
    /// How many times a directory removed or made by another process between the open
    /// and the make is tried again before the last failure is reported.
    static var directoryRaceAttempts: Int { 4 }

    /// Opens the directory `name` below `parent` without following a symbolic link,
    /// creating it with `mode` when it does not exist (also when another process creates
    /// it at the same moment).
    ///
    /// - Parameter path: The directory's path, for errors.
    /// - Returns: The directory's descriptor.
    /// - Throws: ``MirrorError/Kind/permissionDenied`` for a symbolic link,
    ///   ``MirrorError/Kind/ioFailure`` for something else that is not a directory, or the
    ///   kind of the call that failed.
    func openOrMakeDirectory(at parent: Int32, _ name: String, path: String, mode: mode_t) throws(MirrorError) -> Int32 {
        for _ in 0..<Self.directoryRaceAttempts {
            let failure: Failure
            do {
                return try open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            } catch {
                failure = error
            }
            switch failure.code {
            case ENOENT:
                do {
                    try makeDirectory(at: parent, name, mode: mode)
                    try? sync(parent, metadata: true)
                } catch where error.code == EEXIST {
                    // Made by another process meanwhile: open it.
                } catch {
                    throw error.mirrorError(file: path)
                }
            case ELOOP, ENOTDIR, EMLINK:
                if JSONFileIO.info(at: parent, name)?.isSymbolicLink == true {
                    throw MirrorError(
                        .permissionDenied,
                        "\(path) is a symbolic link; the JSON-file database does not follow links "
                            + "below its directory, so it never reads or writes outside it",
                        file: path)
                }
                throw MirrorError(.ioFailure, "\(path) is not a directory", file: path)
            default:
                throw failure.mirrorError(file: path)
            }
        }
        throw MirrorError(.ioFailure, "could not create the directory \(path)", file: path)
    }
}
