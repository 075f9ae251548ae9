import Foundation

extension DirectoryWatcher.Core {
    /// What a directory's files looked like at one moment, to compare with a later look.
    struct DirectorySnapshot: Equatable, Sendable {
        /// What identifies one version of a file's contents and metadata.
        struct FileStamp: Equatable, Sendable {
            var inode: UInt64
            var size: Int64
            var modified: timespec
            var changed: timespec
            var isRegularFile: Bool

            static func == (lhs: FileStamp, rhs: FileStamp) -> Bool {
                lhs.inode == rhs.inode && lhs.size == rhs.size && lhs.isRegularFile == rhs.isRegularFile
                    && lhs.modified.tv_sec == rhs.modified.tv_sec
                    && lhs.modified.tv_nsec == rhs.modified.tv_nsec
                    && lhs.changed.tv_sec == rhs.changed.tv_sec
                    && lhs.changed.tv_nsec == rhs.changed.tv_nsec
            }

            init(_ info: stat) {
                inode = UInt64(info.st_ino)
                size = Int64(info.st_size)
                isRegularFile = (info.st_mode & S_IFMT) == S_IFREG
                (modified, changed) = Platform.times(of: info)
            }
        }

        /// The directory's own inode, or `nil` when it does not exist (a re-created directory
        /// counts as a change).
        var directoryInode: UInt64?
        /// By file name, without the ignored names.
        var files: [String: FileStamp] = [:]
        /// When the look was taken (wall clock, as file times are).
        var takenAt = Platform.wallClock()

        /// How far a file's times may lag the write that set them: file systems stamp times
        /// from a clock that ticks every few milliseconds.
        static let timeGranularity: timespec = timespec(tv_sec: 0, tv_nsec: 50_000_000)

        /// Two looks are equal when their files are, whenever they were taken.
        static func == (lhs: DirectorySnapshot, rhs: DirectorySnapshot) -> Bool {
            lhs.directoryInode == rhs.directoryInode && lhs.files == rhs.files
        }

        /// Whether a file changed so close to `earlier` that a second write within the same
        /// tick of the file clock could hide behind equal stamps: a journal write over
        /// existing bytes changes neither its size nor, within a tick, its times.
        func mayHideAChange(after earlier: timespec) -> Bool {
            var limit = earlier
            limit.tv_nsec -= Self.timeGranularity.tv_nsec
            if limit.tv_nsec < 0 {
                limit.tv_nsec += 1_000_000_000
                limit.tv_sec -= 1
            }
            return files.values.contains { stamp in
                (stamp.changed.tv_sec, stamp.changed.tv_nsec) >= (limit.tv_sec, limit.tv_nsec)
            }
        }

        /// Lists a directory and `lstat`s each entry (symbolic links are not followed).
        static func take(_ directory: String, ignoring ignoredNames: Set<String>) -> DirectorySnapshot {
            var snapshot = DirectorySnapshot()
            var info = stat()
            guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return snapshot }
            snapshot.directoryInode = UInt64(info.st_ino)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
                return snapshot
            }
            for name in names where !ignoredNames.contains(name) {
                var info = stat()
                if lstat(directory + "/" + name, &info) == 0 {
                    snapshot.files[name] = FileStamp(info)
                }
            }
            return snapshot
        }
    }
}
