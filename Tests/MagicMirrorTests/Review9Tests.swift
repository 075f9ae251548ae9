import Foundation
import Testing

@testable import MagicMirror

/// Review of the inotify hub, the kept key orders of DirectJSONEncoder and packed decoding.
@Suite struct Review9Tests {
    // MARK: Directory watching

    #if canImport(Glibc)
    /// A watched directory deleted while the process's inotify queue overflows (its
    /// deletion read in the same batch as the overflow, or lost in it) falls back to
    /// polling, and is noticed when it comes back.
    @Test(arguments: ["before", "after"])
    func aDirectoryDeletedAroundAnOverflowIsNoticedWhenItComesBack(_ when: String) async throws {
        let temporary = try TemporaryDirectory("watch")
        defer { temporary.remove() }
        let result = try await MirrorWorkerRun.run(["watcher-overflow-deleted", temporary.path, when])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "polling noticed")
    }
    #endif
}
