#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The JSON-file database checks a user's private scope itself: see
/// ``verifyPrivateScope(of:)``.
extension JSONFileDatabase: AccountVerifiable {
    /// Checks that `user` can read and write their private scope: the directory
    /// `<root>/private/<user>/`.
    ///
    /// The private scope is reachable when that directory exists or can be created (with
    /// mode 0700, and `<root>/private/` with mode 0711), is a real directory (not a symbolic
    /// link, not a file), is owned by the process's effective user id, has mode 0700 (a
    /// wider mode is narrowed, as opening a private zone does), and can be read and written.
    /// No record is written.
    ///
    /// ```swift
    /// let status = await UserSession.shared.user.verifyAccountAuthentication(in: database)
    /// ```
    ///
    /// - Parameter user: The user to check.
    /// - Throws: A ``MirrorError`` that says why the directory cannot serve as the user's
    ///   private scope, naming it as ``MirrorError/file``.
    public func verifyPrivateScope(of user: MirrorUser) async throws {
        try engine.verifyPrivateDirectory(of: user.name)
    }
}

extension JSONFileEngine {
    /// Opens (creating as needed) `<root>/private/<user>/` and checks that it can serve as
    /// the user's private scope; see ``JSONFileDatabase/verifyPrivateScope(of:)``.
    func verifyPrivateDirectory(of user: String) throws(MirrorError) {
        try NameRules.check(user, as: "user name", scope: .private)
        let privateName = JSONFileFormat.privateDirectory
        let privatePath = context.rootPath + "/" + privateName
        let privateFD = try openOrMakeDirectory(at: context.rootFD, privateName, path: privatePath, mode: 0o711)
        defer { close(privateFD) }
        let userPath = privatePath + "/" + user
        let userFD = try openOrMakeDirectory(at: privateFD, user, path: userPath, mode: 0o700)
        defer { close(userFD) }

        var info = stat()
        guard fstat(userFD, &info) == 0 else { throw MirrorError.posix(errno, "fstat", file: userPath) }
        let owner = geteuid()
        guard info.st_uid == owner else {
            throw MirrorError(
                .permissionDenied,
                "\(userPath) belongs to user id \(info.st_uid), not to this process's user id \(owner); "
                    + "a private scope must be its owner's alone",
                scope: .private, file: userPath)
        }
        if info.st_mode & 0o777 != 0o700 {
            do throws(FileSystem.Failure) {
                try context.fileSystem.changeMode(userFD, to: 0o700)
            } catch {
                throw MirrorError(
                    .permissionDenied,
                    "\(userPath) has mode \(String(info.st_mode & 0o777, radix: 8)) and cannot be "
                        + "narrowed to 0700: \(error.mirrorError(file: userPath).message)",
                    scope: .private, file: userPath)
            }
        }
        guard faccessat(privateFD, user, R_OK | W_OK | X_OK, AT_EACCESS) == 0 else {
            let code = errno
            throw MirrorError(
                code == EROFS ? .readOnly : .permissionDenied,
                "\(userPath) cannot be read and written: \(String(cString: strerror(code)))",
                scope: .private, file: userPath)
        }
    }

    /// Opens a directory below `parent`, creating it with `mode` if it does not exist,
    /// without following a symbolic link.
    private func openOrMakeDirectory(
        at parent: Int32, _ name: String, path: String, mode: mode_t
    ) throws(MirrorError) -> Int32 {
        let fileSystem = context.fileSystem
        for _ in 0..<4 {
            do throws(FileSystem.Failure) {
                return try fileSystem.open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            } catch where error.code == ENOENT {
                do throws(FileSystem.Failure) {
                    try fileSystem.makeDirectory(at: parent, name, mode: mode)
                    try? fileSystem.sync(parent, metadata: true)
                } catch where error.code == EEXIST {
                    // Made by another process meanwhile: open it.
                } catch {
                    throw error.mirrorError(file: path).adding(scope: .private)
                }
            } catch where error.code == ELOOP || error.code == ENOTDIR || error.code == EMLINK {
                if JSONFileIO.info(at: parent, name)?.isSymbolicLink == true {
                    throw MirrorError(
                        .permissionDenied,
                        "\(path) is a symbolic link; the JSON-file database does not follow links "
                            + "below its directory", scope: .private, file: path)
                }
                throw MirrorError(.ioFailure, "\(path) is not a directory", scope: .private, file: path)
            } catch {
                throw error.mirrorError(file: path).adding(scope: .private)
            }
        }
        throw MirrorError(.ioFailure, "could not create the directory \(path)", scope: .private, file: path)
    }
}
