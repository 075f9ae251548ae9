import Foundation

/// Where the fields of a large snapshot's records are kept once read: an unnamed file in
/// the zone's directory (`O_TMPFILE`), written a buffer at a time as the snapshot is read
/// and mapped back (``MappedBytes``).
///
/// Opening a zone of 100,000 records otherwise holds every record's fields in the heap
/// (about 19 MB for 170-byte records), beside the values a mirror decodes from them. In
/// the spill file they are in the kernel's page cache instead: mapped in while they are
/// read, given back after (decoding and compaction release them as they go), and
/// reclaimable by the kernel under memory pressure, as a database's pages are.
///
/// The file has no name, so no other program can open, truncate or change it through the
/// directory (a mapped file changed under the process could fault it), and the system frees
/// its space when the last mapping and descriptor go, including when the process is killed.
/// Its dirty pages may be written to the disk while the process runs: the price of memory
/// the kernel can take back.
///
/// Any failure (a file system without `O_TMPFILE`, a read-only directory, a full disk, no
/// address space) keeps the fields in memory, as before: spilling saves memory, never
/// data. A spill takes disk space as long as its records are held, so none is made where
/// the disk has no room to spare for it (``Target/init(fileSystem:directory:spilling:)``):
/// it would take the space the zone's commits need. Only Linux spills.
final class FieldsSpill: @unchecked Sendable {
    /// Where spill files are made: a zone's directory, through the engine's file system
    /// (so tests can fail the calls).
    struct Target: Sendable {
        fileprivate let fileSystem: FileSystem
        fileprivate let directoryFD: Int32

        /// A target in the directory `directoryFD` for the fields of `size` bytes read, or
        /// `nil` where spilling is not done: off Linux, and when the directory's file system
        /// has less free than ``FieldsSpill/roomNeeded(toSpill:)``.
        init?(fileSystem: FileSystem, directory directoryFD: Int32, spilling size: Int) {
            #if os(Linux)
            var stats = statvfs()
            guard fstatvfs(directoryFD, &stats) == 0, stats.f_frsize > 0,
                  UInt64(stats.f_bavail) > UInt64(FieldsSpill.roomNeeded(toSpill: size)) / UInt64(stats.f_frsize)
            else { return nil }
            self.fileSystem = fileSystem
            self.directoryFD = directoryFD
            #else
            return nil
            #endif
        }
    }

    /// The free space a file system must have for a spill of the fields of `size` bytes
    /// read: room for the spill (at most `size`), then for a compaction that writes the
    /// zone again (about `size`), and ``spaceKeptFree`` more.
    static func roomNeeded(toSpill size: Int) -> Int {
        2 * size + spaceKeptFree
    }

    /// What a spill leaves free on its file system beyond the zone's own needs, for other
    /// files and programs.
    static let spaceKeptFree = 64 << 20

    /// From this many bytes read at once (a snapshot, or a journal on opening), the records'
    /// fields are spilled.
    static let sizeSpilled = 4 << 20

    /// Where the fields of a read of `size` bytes go: `nil` below ``sizeSpilled`` (they stay
    /// in memory), else a ``Target`` in the directory `directoryFD`, if it gives one.
    static func target(forReading size: Int, fileSystem: FileSystem, directory directoryFD: Int32) -> Target? {
        size >= sizeSpilled ? Target(fileSystem: fileSystem, directory: directoryFD, spilling: size) : nil
    }

    private let target: Target
    private var fd: Int32 = -1
    /// Where the next buffer goes in the file (a multiple of the page size).
    private var offset = 0
    /// The file's descriptor once it is open, else `-1` (for tests).
    var descriptor: Int32 { fd }
    /// Set by a failure: nothing more is spilled to this file.
    private(set) var hasFailed = false

    /// A spill that opens its file when it first keeps something. One reader uses it at a
    /// time (each part of a snapshot read in parallel has its own).
    init(_ target: Target) {
        self.target = target
    }

    deinit {
        // The mappings hold the file on their own.
        if fd >= 0 { close(fd) }
    }

    /// `O_TMPFILE`, which Swift does not import (a macro of a macro): a file with no name in
    /// the directory opened. Its value is the same on every Linux architecture Swift runs on;
    /// a kernel or file system without it fails the open (`EISDIR`, `EOPNOTSUPP`), and the
    /// fields stay in memory. Never used elsewhere (``Target`` is `nil` there).
    private static var unnamedFile: Int32 {
        #if os(Linux)
        0o20_000_000 | O_DIRECTORY
        #else
        0
        #endif
    }

    /// `count` rounded up to a whole number of pages: the room a buffer must have to be
    /// kept (see ``keep(_:count:)``).
    static func roundedToPages(_ count: Int) -> Int {
        (count + MappedBytes.pageSize - 1) / MappedBytes.pageSize * MappedBytes.pageSize
    }

    /// Writes the first `count` bytes of `buffer` to the file (padded with zeros to a whole
    /// page, which `buffer` must have room for) and maps them back.
    ///
    /// - Returns: The bytes, mapped; `nil` when they could not be kept (the caller keeps
    ///   them in memory), and from then on.
    func keep(_ buffer: UnsafeMutableRawBufferPointer, count: Int) -> Data? {
        guard !hasFailed, count > 0, let base = buffer.baseAddress else { return nil }
        let length = Self.roundedToPages(count)
        precondition(length <= buffer.count, "a kept buffer has room for whole pages")
        (base + count).initializeMemory(as: UInt8.self, repeating: 0, count: length - count)
        do throws(FileSystem.Failure) {
            if fd < 0 {
                // O_EXCL: the file can never be given a name (`linkat` through /proc).
                fd = try target.fileSystem.open(
                    at: target.directoryFD, ".", flags: Self.unnamedFile | O_RDWR | O_EXCL, mode: 0o600)
            }
            try target.fileSystem.write(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
        } catch {
            hasFailed = true
            return nil
        }
        guard let data = MappedBytes.map(fd, offset: offset, count: count) else {
            hasFailed = true
            return nil
        }
        offset += length
        return data
    }
}
