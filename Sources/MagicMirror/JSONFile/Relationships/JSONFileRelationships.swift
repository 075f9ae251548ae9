import Foundation
import Synchronization

/// The delete rules and the interrupted linked commits of each scope space of one engine
/// (see <doc:JSONFileFormat>, "Relationships").
///
/// A scope space keeps its files in `relationships/public/` or
/// `relationships/private/<user>/` (0700, files 0600):
///
/// - `rules.ndjson`: a header line, then one ``StoredDeleteRule`` per line; replaced whole
///   (written to `rules.ndjson.tmp`, flushed, renamed) when a mirror registers its type's
///   rules.
/// - `lock`: taken (`flock`) by every linked commit of the space and every registration,
///   before any zone's lock; so linked commits of one space run one at a time.
/// - `intent.ndjson`: the redo record of the linked commit in progress (see
///   `JSONFileEngine+LinkedCommit.swift`); left behind only by a writer that died.
///
/// Locks, always taken in this order: a space's `state` (a `Mutex`, held across the whole
/// linked commit or registration), the space's `lock` file, then the zones' locks in the
/// order of their paths (`disk`, their `lock` file), as ``JSONFileZone`` describes.
final class JSONFileRelationships: Sendable {
    static let directory = "relationships"
    static let rulesFile = "rules.ndjson"
    static let rulesTemporaryFile = "rules.ndjson.tmp"
    static let intentFile = "intent.ndjson"
    static let intentTemporaryFile = "intent.ndjson.tmp"
    static let lockFile = "lock"

    /// One scope space's files and cached rules.
    final class Space: Sendable {
        /// What `state` guards.
        struct State {
            var directoryFD: Int32 = -1
            var lockFD: Int32 = -1
            /// The rules file the cached rules were read from, kept open so that its inode
            /// cannot be reused and mistaken for the same file; -1 when there is none.
            var rulesFD: Int32 = -1
            var rulesInfo: JSONFileIO.FileInfo?
            var rules: [StoredDeleteRule] = []
        }

        /// A zone of the space (any record type), for its scope and user.
        let zone: ZoneID
        /// The directory names from the root to the space's directory.
        let components: [String]
        let path: String
        let isPrivate: Bool
        let state = Mutex(State())
        /// Set once an interrupted linked commit was looked for in this engine.
        let recovered = Atomic<Bool>(false)

        init(zone: ZoneID, rootPath: String) {
            self.zone = zone
            self.isPrivate = zone.scope == .private
            let scopeComponents = JSONFileZone.components(of: zone).dropLast()
            self.components = [JSONFileRelationships.directory] + scopeComponents
            self.path = ([rootPath] + components).joined(separator: "/")
        }

        deinit {
            state.withLock { state in
                for fd in [state.directoryFD, state.lockFD, state.rulesFD] where fd >= 0 { close(fd) }
            }
        }

        /// The mode new files of the space are created with (before the umask).
        var fileMode: mode_t { isPrivate ? 0o600 : 0o666 }

        func path(_ name: String) -> String { path + "/" + name }
    }

    private let spaces = Mutex<[String: Space]>([:])

    /// The space of `zone`.
    func space(of zone: ZoneID, rootPath: String) -> Space {
        spaces.withLock { spaces in
            if let space = spaces[zone.spaceKey] { return space }
            let space = Space(zone: zone, rootPath: rootPath)
            spaces[zone.spaceKey] = space
            return space
        }
    }
}

extension JSONFileRelationships.Space {
    /// Opens the space's directory, creating it (and its parents) when `create`.
    ///
    /// - Returns: Whether it is open; `false` when it does not exist and `create` is false.
    @discardableResult
    func openDirectory(_ state: inout State, context: JSONFileContext, create: Bool) throws(MirrorError) -> Bool {
        if state.directoryFD >= 0 { return true }
        var parent = context.rootFD
        var path = context.rootPath
        var toClose: [Int32] = []
        defer { for fd in toClose { close(fd) } }
        for (index, name) in components.enumerated() {
            path += "/" + name
            let fd: Int32
            if create {
                // relationships/ and relationships/private/: 0711; a user's: 0700.
                let mode: mode_t = !isPrivate ? 0o777 : (index < 2 ? 0o711 : 0o700)
                fd = try context.fileSystem.openOrMakeDirectory(at: parent, name, path: path, mode: mode)
            } else {
                do {
                    fd = try context.fileSystem.open(at: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                } catch where error.code == ENOENT {
                    return false
                } catch {
                    throw error.mirrorError(file: path)
                }
            }
            if index < components.count - 1 { toClose.append(fd) }
            parent = fd
        }
        state.directoryFD = parent
        return true
    }

    /// Takes the space's lock (waiting), creating its directory and lock file as needed.
    ///
    /// - Returns: The locked descriptor; unlock it with `FileLock.unlock`.
    func lock(_ state: inout State, context: JSONFileContext) throws(MirrorError) -> Int32 {
        try openDirectory(&state, context: context, create: true)
        if state.lockFD < 0 {
            do {
                state.lockFD = try context.fileSystem.openWritableOrReadOnly(
                    at: state.directoryFD, JSONFileRelationships.lockFile, flags: O_CREAT, mode: fileMode).fd
            } catch {
                throw error.mirrorError(file: path(JSONFileRelationships.lockFile))
            }
        }
        let code = FileLock.lock(state.lockFD)
        guard code == 0 else {
            throw MirrorError.posix(code, "flock", file: path(JSONFileRelationships.lockFile))
        }
        return state.lockFD
    }

    /// Whether an interrupted linked commit left its intent behind.
    func hasIntent(_ state: inout State, context: JSONFileContext) -> Bool {
        guard (try? openDirectory(&state, context: context, create: false)) == true else { return false }
        return JSONFileIO.info(at: state.directoryFD, JSONFileRelationships.intentFile) != nil
    }
}
