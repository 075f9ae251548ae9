import Foundation
import Testing

@testable import MagicMirror

/// The polling watcher's look at a directory. File systems stamp times from a clock that
/// may tick every few milliseconds (Linux before 6.13 stamps every write of one tick
/// alike), so a write over reserved journal space, which keeps the size, can hide behind
/// equal stamps: a file changed within that margin of the previous look counts as changed.
@Suite struct DirectorySnapshotTests {
    typealias Snapshot = DirectoryWatcher.Core.DirectorySnapshot

    @Test func aFileChangedJustBeforeALookMayHideASecondChange() throws {
        let temporary = try TemporaryDirectory("snapshot")
        defer { temporary.remove() }
        try Data("{}\n".utf8).write(to: temporary.url.appendingPathComponent("journal-0.ndjson"))
        let look = Snapshot.take(temporary.path, ignoring: [])
        #expect(look.files.count == 1)
        #expect(look.mayHideAChange(after: look.takenAt))
    }

    @Test func filesUnchangedForLongerThanTheMarginHideNothing() async throws {
        let temporary = try TemporaryDirectory("snapshot")
        defer { temporary.remove() }
        try Data("{}\n".utf8).write(to: temporary.url.appendingPathComponent("journal-0.ndjson"))
        // Longer than the margin: a slow machine only makes the file older.
        try await Task.sleep(for: .milliseconds(300))
        let look = Snapshot.take(temporary.path, ignoring: [])
        #expect(!look.mayHideAChange(after: look.takenAt))
        #expect(look == Snapshot.take(temporary.path, ignoring: []), "looks compare files, not when they were taken")
    }
}
