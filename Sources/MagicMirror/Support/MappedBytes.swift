import Foundation
import Synchronization

/// Bytes of a file mapped into memory, as `Data`, and the one thing done to all of them at
/// once: giving their pages back (``releaseResidentPages()``).
///
/// A page of a mapped file is part of the process's resident memory only while it is
/// mapped in: once given back (`MADV_DONTNEED`), the next read maps it in again from the
/// kernel's page cache (or reads it from the file), with the same bytes. The page cache,
/// unlike the process's heap, can drop clean pages and write dirty ones back when memory
/// is short. So a reader that goes through many mapped bytes once (decoding every record
/// of a large zone, writing them all to a compacted snapshot) gives the pages back as it
/// goes, and holds a few of them at a time instead of all.
///
/// Only files nobody else can write are mapped (``FieldsSpill``'s unnamed files): a
/// mapped file that another program truncated would fault (`SIGBUS`) when read. And only
/// files of the process's own: a change made through the `Data` changes the file (see
/// ``map(_:offset:count:)``).
package enum MappedBytes {
    /// Every live mapping: its start and length. A mapping leaves the table, under the
    /// lock, before it is unmapped, so ``releaseResidentPages()`` never advises memory
    /// that is no longer (or, reused, not yet) this table's.
    private static let mappings = Mutex<[UInt: Int]>([:])
    /// How many mappings are live: `0` lets a release skip the lock.
    private static let liveCount = Atomic<Int>(0)

    /// The system's page size.
    package static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Maps `count` bytes of `fd` (open for reading and writing) from `offset` (a multiple
    /// of ``pageSize``), as `Data` that unmaps them when the last copy or slice of it goes.
    ///
    /// The mapping is writable and shared: `Data` changes the bytes of a storage that no
    /// other `Data` shares where they lie, rather than copying them (a holder of a record's
    /// fields may change them in place), and a change to a shared mapping stays in the file
    /// when its pages are given back. A read-only mapping would fault there.
    ///
    /// - Returns: `nil` when the system refuses the mapping (`errno` says why).
    package static func map(_ fd: Int32, offset: Int, count: Int) -> Data? {
        precondition(offset % pageSize == 0 && count > 0, "a mapping starts at a page")
        let length = (count + pageSize - 1) / pageSize * pageSize
        // MAP_FAILED is (void *)-1.
        guard let start = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset)),
              Int(bitPattern: start) != -1
        else { return nil }
        mappings.withLock { $0[UInt(bitPattern: start)] = length }
        liveCount.add(1, ordering: .relaxed)
        return Data(bytesNoCopy: start, count: count, deallocator: .custom { start, _ in
            mappings.withLock { table in
                guard let length = table.removeValue(forKey: UInt(bitPattern: start)) else { return }
                munmap(start, length)
            }
            liveCount.subtract(1, ordering: .relaxed)
        })
    }

    /// Gives back the resident pages of every mapping. Always safe: the bytes stay in the
    /// files, and a later read maps them in again. Costs one call per mapping.
    package static func releaseResidentPages() {
        guard liveCount.load(ordering: .relaxed) > 0 else { return }
        mappings.withLock { table in
            for (start, length) in table {
                _ = madvise(UnsafeMutableRawPointer(bitPattern: start), length, Int32(MADV_DONTNEED))
            }
        }
    }

    /// The start and length of every live mapping (for tests, which read their resident
    /// size from `/proc/self/smaps`).
    package static var ranges: [(start: UInt, length: Int)] {
        mappings.withLock { $0.map { ($0.key, $0.value) } }
    }

    /// How many mappings are live (for tests).
    package static var count: Int { liveCount.load(ordering: .relaxed) }
}
