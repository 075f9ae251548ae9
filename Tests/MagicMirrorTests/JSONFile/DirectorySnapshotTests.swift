import Foundation
import Testing

@testable import MagicMirror

/// The polling watcher's look at a directory. File systems stamp times from a clock that
/// may tick every few milliseconds (Linux before 6.13 stamps every write of one tick
/// alike), so a write over existing bytes, which keeps the size, can hide behind
/// equal stamps: a file changed within that margin of the previous look counts as changed.
@Suite(.timeLimit(.minutes(5))) struct DirectorySnapshotTests {
    typealias Snapshot = DirectoryWatcher.Core.DirectorySnapshot

    @Test func aFileChangedJustBeforeALookMayHideASecondChange() throws {
        let temporary = try TemporaryDirectory("snapshot")
        defer { temporary.remove() }
        try Data("{}\n".utf8).write(to: temporary.url.appendingPathComponent("journal-0.ndjson"))
        let look = Snapshot.take(temporary.path, ignoring: [])
        #expect(look.files.count == 1)
        #expect(look.mayHideAChange(after: look.takenAt))
    }

    @Test func filesUnchangedForLongerThanTheMarginHideNothing() throws {
        let temporary = try TemporaryDirectory("snapshot")
        defer { temporary.remove() }
        try Data("{}\n".utf8).write(to: temporary.url.appendingPathComponent("journal-0.ndjson"))
        let look = Snapshot.take(temporary.path, ignoring: [])
        // A look ten seconds later, far past the margin (no file's change time can be set
        // back, and a wait would depend on the machine's load).
        var later = look.takenAt
        later.tv_sec += 10
        #expect(!look.mayHideAChange(after: later))
        #expect(look == Snapshot.take(temporary.path, ignoring: []), "looks compare files, not when they were taken")
    }
}

/// Where a journal's data ends before a tail of spaces.
@Suite(.timeLimit(.minutes(5))) struct JournalDataEndTests {
    private func dataEnd(_ text: String) -> Int {
        Array(text.utf8).withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { JSONFileFormat.dataEnd($0, count: buffer.count) } ?? 0
        }
    }

    @Test func theDataEndsBeforeTheTrailingSpacesOnly() {
        #expect(dataEnd("") == 0)
        #expect(dataEnd(String(repeating: " ", count: 37)) == 0)
        #expect(dataEnd("{\"a\":1}\n") == 8)
        // Every alignment of the data's end against the eight-byte steps.
        for spaces in 0..<20 {
            for data in ["{}\n", "{\"t\":\"a b \"}\n", "x", "\n"] {
                #expect(dataEnd(data + String(repeating: " ", count: spaces)) == data.utf8.count, "\(data) + \(spaces)")
            }
        }
        // Spaces inside the data are data.
        #expect(dataEnd("{\"t\":\"        \"}\n" + String(repeating: " ", count: 100)) == 17)
        // A torn append whose visible bytes end in a space looks shorter: harmless, as the
        // bytes before it are not a complete append either.
        #expect(dataEnd("{\"t\":\"a  " + String(repeating: " ", count: 50)) == 7)
    }
}

/// The identity and size the JSON-file database reads of its files: on Linux through a
/// `statx` that does not read the times (see `JSONFileIO.Statx`), which must give what
/// `stat` gives.
@Suite(.timeLimit(.minutes(5))) struct FileInfoTests {
    @Test func infoAgreesWithStat() throws {
        #if canImport(Glibc)
        #expect(JSONFileIO.Statx.function != nil, "glibc has statx")
        #endif
        let temporary = try TemporaryDirectory("file-info")
        defer { temporary.remove() }
        let file = temporary.url.appendingPathComponent("journal-0.ndjson")
        try Data(String(repeating: "x", count: 1234).utf8).write(to: file)
        #expect(chmod(file.path, 0o640) == 0)
        #expect(symlink(file.path, temporary.path + "/link") == 0)
        let directoryFD = open(temporary.path, O_RDONLY | O_DIRECTORY)
        let fileFD = open(file.path, O_RDONLY)
        defer { close(directoryFD); close(fileFD) }

        for (name, info) in [
            ("journal-0.ndjson", JSONFileIO.info(at: directoryFD, "journal-0.ndjson")),
            ("journal-0.ndjson", JSONFileIO.info(fileFD)),
            ("link", JSONFileIO.info(at: directoryFD, "link")),
            (".", JSONFileIO.info(directoryFD)),
        ] {
            var status = stat()
            #expect(fstatat(directoryFD, name, &status, AT_SYMLINK_NOFOLLOW) == 0)
            #expect(info == JSONFileIO.FileInfo(status), "\(name)")
        }
        #expect(JSONFileIO.info(fileFD)?.size == 1234)
        #expect(JSONFileIO.info(fileFD)?.mode == 0o640)
        #expect(JSONFileIO.info(at: directoryFD, "link")?.isSymbolicLink == true)
        #expect(JSONFileIO.info(directoryFD)?.isDirectory == true)
        #expect(JSONFileIO.info(at: directoryFD, "missing") == nil && errno == ENOENT)
    }

    #if canImport(Glibc)
    /// A seccomp filter that does not know `statx` (older container runtimes) refuses it with
    /// `EPERM`: `fstat` answers instead, and the files can still be opened.
    @Test func aRefusedStatxFallsBackToFstat() throws {
        let temporary = try TemporaryDirectory("file-info-refused")
        defer { temporary.remove() }
        let file = temporary.url.appendingPathComponent("journal-0.ndjson")
        try Data("{}\n".utf8).write(to: file)
        let fd = open(file.path, O_RDONLY)
        defer { close(fd) }
        var status = stat()
        #expect(fstat(fd, &status) == 0)
        let refusing: JSONFileIO.Statx.Function = { _, _, _, _, _ in
            errno = EPERM
            return -1
        }
        #expect(JSONFileIO.info(fd, statx: refusing) == JSONFileIO.FileInfo(status))
        let failing: JSONFileIO.Statx.Function = { _, _, _, _, _ in
            errno = EIO
            return -1
        }
        #expect(JSONFileIO.info(fd, statx: failing) == nil && errno == EIO, "another failure is the answer")
    }
    #endif
}
