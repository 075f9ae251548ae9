#if canImport(Glibc)
import Foundation
import Glibc
@testable import MagicMirror
import Testing

/// Review finding: a snapshot read that fails after the first records were read (EIO on a
/// later piece) leaks the buffer the records' fields were being copied into (1 MiB, from
/// `malloc`, owned by nothing once the parser is dropped).
@Suite(.timeLimit(.minutes(5))) struct SnapshotReadFailureLeakTests {
    /// The process's virtual size (`VmSize`), in bytes: a leaked buffer stays mapped.
    static func allocated() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    @Test func aReadThatFailsAfterSomeRecordsFreesTheirFieldsBuffer() {
        let bytes = JSONFileSnapshotReadingTests.snapshot(JSONFileSnapshotReadingTests.records(30))
        let rounds = 400
        // The least growth of three trials: a leak grows every one by 400 MiB; mappings
        // made by tests running meanwhile (thread stacks, malloc arenas) do not repeat.
        let grown = (0..<3).map { _ in
            let before = Self.allocated()
            for _ in 0..<rounds {
                let reads = ReadCounter()
                _ = try? JSONFileSnapshotReadingTests.read(bytes, pieceSize: 256) { _ in reads.next() == 3 ? EIO : nil }
            }
            return Self.allocated() - before
        }.min() ?? 0
        #expect(grown < (rounds / 2) << 20, "\(grown) bytes still mapped after \(rounds) failed reads")
    }
}
#endif
