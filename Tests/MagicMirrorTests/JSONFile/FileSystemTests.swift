#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// The calls the live file system is made of, and the one written once on top of them:
/// "open read-write, else read-only".
@Suite(.timeLimit(.minutes(5))) struct FileSystemTests {
    @Test func liveCallsChangeTheDisk() throws {
        try withOpenTemporaryDirectory { directory, root in
            let fileSystem = FileSystem.live

            try fileSystem.makeDirectory(at: root, "sub", mode: 0o700)
            let fd = try fileSystem.open(at: root, "file", flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
            defer { close(fd) }
            try fileSystem.write(fd, bytes: Array("abcdef".utf8))
            try fileSystem.sync(fd)
            try fileSystem.truncate(fd, to: 3)
            try fileSystem.changeMode(fd, to: 0o640)
            try fileSystem.link(at: root, "file", to: "linked")
            try fileSystem.rename(at: root, "linked", to: "renamed")
            try fileSystem.unlink(at: root, "file")
            try fileSystem.sync(root, metadata: true)

            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
            #expect(names == ["renamed", "sub"])
            #expect(try String(contentsOf: directory.url.appendingPathComponent("renamed"), encoding: .utf8) == "abc")
            let mode = try FileManager.default.attributesOfItem(atPath: directory.path + "/renamed")[.posixPermissions] as? Int
            #expect(mode == 0o640)
        }
    }

    @Test func liveCallsReportTheirErrno() throws {
        try withOpenTemporaryDirectory { directory, root in

            var failure: FileSystem.Failure?
            do throws(FileSystem.Failure) {
                _ = try FileSystem.live.open(at: root, "missing", flags: O_RDONLY)
            } catch {
                failure = error
            }
            #expect(failure?.operation == .open)
            #expect(failure?.code == ENOENT)
            #expect(failure?.mirrorError(file: "missing").kind == .ioFailure)
        }
    }

    @Test(arguments: [EACCES, EROFS])
    func aFileThisProcessMayNotWriteOpensReadOnly(code: Int32) throws {
        try withOpenTemporaryDirectory { directory, root in
            _ = FileManager.default.createFile(atPath: directory.path + "/lock", contents: Data("x".utf8))
            let faulty = FaultyFileSystem()
            faulty.failNext(.open, errno: code)

            let (fd, isWritable) = try faulty.fileSystem.openWritableOrReadOnly(at: root, "lock", flags: O_CREAT, mode: 0o600)
            defer { close(fd) }
            #expect(!isWritable)
            #expect(faulty.count(.open) == 2, "a read-write open, then a read-only one")
            var byte: UInt8 = 0
            #expect(read(fd, &byte, 1) == 1)
            #expect(writeOneByte(to: fd) < 0, "the descriptor is read-only")
        }
    }

    @Test func aWritableFileOpensReadWrite() throws {
        try withOpenTemporaryDirectory { directory, root in
            let faulty = FaultyFileSystem()

            let (fd, isWritable) = try faulty.fileSystem.openWritableOrReadOnly(at: root, "new", flags: O_CREAT, mode: 0o600)
            defer { close(fd) }
            #expect(isWritable)
            #expect(faulty.count(.open) == 1)
            #expect(FileManager.default.fileExists(atPath: directory.path + "/new"))
        }
    }

    /// Other failures, and a read-only open that fails too, throw the read-write open's error.
    @Test(arguments: [(EACCES, 2), (ENOSPC, 1)])
    func otherwiseTheReadWriteFailureIsThrown(code: Int32, times: Int) throws {
        try withOpenTemporaryDirectory { directory, root in
            _ = FileManager.default.createFile(atPath: directory.path + "/lock", contents: Data())
            let faulty = FaultyFileSystem()
            faulty.failNext(.open, errno: code, times: times)

            var failure: FileSystem.Failure?
            do throws(FileSystem.Failure) {
                close(try faulty.fileSystem.openWritableOrReadOnly(at: root, "lock", flags: O_CREAT).fd)
            } catch {
                failure = error
            }
            #expect(failure?.code == code)
            #expect(faulty.count(.open) == times)
        }
    }
}

/// Writes one byte to `fd`: what `write(2)` returns.
private func writeOneByte(to fd: Int32) -> Int {
    var byte: UInt8 = 0x21
    return write(fd, &byte, 1)
}
