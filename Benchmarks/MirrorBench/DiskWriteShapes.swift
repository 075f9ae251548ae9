import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Workloads {
    /// `fsync-shapes`: what one 200-byte write followed by `fdatasync` costs on this disk,
    /// by where it lands, so that the reason for preallocating a journal can be seen:
    ///
    /// - `grow`: an append that grows the file (what a journal does today): the flush also
    ///   writes the new size and the newly allocated blocks;
    /// - `overwrite`: a write over bytes written (and flushed) before, inside the file:
    ///   data only, the shape of SQLite's WAL, which reuses its space;
    /// - `fallocated`: a write into space reserved by `posix_fallocate` (`F_PREALLOCATE`
    ///   and `ftruncate` on macOS) and never written: the size is already durable, but the
    ///   file system still marks the extent written.
    static func fsyncShapes(count: Int) throws -> [BenchResult] {
        let directory = try BenchDirectory("fsync-shapes")
        defer { directory.remove() }
        var perOp: [String: Double] = [:]
        // Alternated, so that a burst of load on the machine hits every shape alike.
        for round in 0..<3 {
            for shape in ["grow", "overwrite", "fallocated"] {
                let seconds = try DiskWriteShape.measure(shape, count: count, in: directory.url, round: round)
                perOp[shape, default: .infinity] = min(perOp[shape, default: .infinity], seconds)
            }
        }
        let grow = perOp["grow"]!
        return ["grow", "overwrite", "fallocated"].map { shape in
            let seconds = perOp[shape]!
            return BenchResult(
                name: "fsync-shapes", variant: shape, n: count, seconds: seconds * Double(count),
                perOpMicros: seconds * 1e6,
                baseline: shape == "grow" ? nil : "grow", baselineFigure: shape == "grow" ? nil : grow * 1e6,
                baselineUnit: shape == "grow" ? nil : "µs/op", ratio: shape == "grow" ? nil : seconds / grow,
                note: "200-byte write + fdatasync; the best of 3 alternated rounds")
        }
    }
}

/// The raw write-and-flush loops of `fsync-shapes`.
enum DiskWriteShape {
    static let size = 200

    /// Seconds per write + flush of one shape.
    static func measure(_ shape: String, count: Int, in directory: URL, round: Int) throws -> Double {
        let path = directory.appendingPathComponent("\(shape)-\(round).log").path
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot open \(path)") }
        defer { close(fd) }
        let total = count * size
        switch shape {
        case "overwrite":
            let zeros = [UInt8](repeating: 0, count: total)
            guard zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress, total, 0) }) == total, fsync(fd) == 0 else {
                throw BenchError("cannot prepare \(path)")
            }
        case "fallocated":
            try reserve(fd, bytes: total)
        default:
            break
        }
        var line = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        line[size - 1] = UInt8(ascii: "\n")
        let start = monotonicSeconds()
        for index in 0..<count {
            let written = line.withUnsafeBytes { pwrite(fd, $0.baseAddress, size, off_t(index * size)) }
            guard written == size, flushData(fd) == 0 else { throw BenchError("write failed: \(errno)") }
        }
        return (monotonicSeconds() - start) / Double(count)
    }

    /// Reserves `bytes` of disk space for the file and sets its size, without writing them.
    static func reserve(_ fd: Int32, bytes: Int) throws {
        #if canImport(Glibc)
        let code = posix_fallocate(fd, 0, off_t(bytes))
        guard code == 0 else { throw BenchError("posix_fallocate failed: \(code)") }
        #else
        var store = fstore_t(
            fst_flags: UInt32(F_ALLOCATEALL), fst_posmode: F_PEOFPOSMODE, fst_offset: 0,
            fst_length: off_t(bytes), fst_bytesalloc: 0)
        _ = fcntl(fd, F_PREALLOCATE, &store)
        guard ftruncate(fd, off_t(bytes)) == 0 else { throw BenchError("ftruncate failed: \(errno)") }
        #endif
        guard fsync(fd) == 0 else { throw BenchError("fsync failed: \(errno)") }
    }

    /// `fdatasync` on Linux; `F_FULLFSYNC` on macOS, as the JSON-file database flushes.
    static func flushData(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
        fdatasync(fd)
        #else
        fcntl(fd, F_FULLFSYNC) == 0 ? 0 : fsync(fd)
        #endif
    }
}
