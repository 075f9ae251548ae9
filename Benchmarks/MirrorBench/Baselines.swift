import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The physical and library limits each workload is compared with.
enum Baselines {
    /// Seconds per append of `size` bytes to a file in `directory`, with or without an
    /// fsync after each: the limit a journal append cannot beat on this disk.
    static func rawAppend(count: Int, size: Int = 200, fsync sync: Bool, in directory: URL) -> Double {
        let path = directory.appendingPathComponent("raw-\(sync ? "fsync" : "nosync").log").path
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "cannot open \(path)")
        defer { close(fd) }
        var line = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        line[size - 1] = UInt8(ascii: "\n")
        let seconds = time {
            for _ in 0..<count {
                let written = line.withUnsafeBytes { write(fd, $0.baseAddress, size) }
                precondition(written == size)
                if sync { precondition(fsync(fd) == 0) }
            }
        }
        return seconds / Double(count)
    }

    /// Seconds for JSONEncoder to encode `records` as one array.
    static func encode(_ records: [BenchRecord]) -> Double {
        let encoder = JSONEncoder()
        return time { _ = try! encoder.encode(records) }
    }

    /// Seconds for JSONDecoder to decode `records`, encoded as one array.
    static func decode(_ records: [BenchRecord]) -> Double {
        let data = try! JSONEncoder().encode(records)
        let decoder = JSONDecoder()
        return time { _ = try! decoder.decode([BenchRecord].self, from: data) }
    }
}
