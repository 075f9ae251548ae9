#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// The test file system: it passes calls to the live one, counts them, and fails the calls
/// it was told to fail, exactly as many times as told.
@Suite(.timeLimit(.minutes(5))) struct FaultyFileSystemTests {
    @Test func callsPassThroughAndAreCounted() throws {
        try withOpenTemporaryDirectory { directory, root in
            let faulty = FaultyFileSystem()
            let fileSystem = faulty.fileSystem

            let fd = try fileSystem.open(at: root, "a", flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            try fileSystem.write(fd, bytes: Array("hello".utf8))
            try fileSystem.sync(fd)
            close(fd)
            try fileSystem.rename(at: root, "a", to: "b")

            #expect(try String(contentsOf: directory.url.appendingPathComponent("b"), encoding: .utf8) == "hello")
            #expect(faulty.count(.open) == 1)
            #expect(faulty.count(.write) == 1)
            #expect(faulty.count(.fsync) == 1)
            #expect(faulty.count(.rename) == 1)
            #expect(faulty.count(.unlink) == 0)
        }
    }

    @Test func aFaultFailsExactlyTheNextCallsOfItsOperation() throws {
        try withOpenTemporaryDirectory { directory, root in
            let faulty = FaultyFileSystem()
            let fileSystem = faulty.fileSystem
            faulty.failNext(.mkdir, errno: EACCES, times: 2)

            for _ in 0..<2 {
                var failure: FileSystem.Failure?
                do throws(FileSystem.Failure) {
                    try fileSystem.makeDirectory(at: root, "d", mode: 0o700)
                } catch {
                    failure = error
                }
                #expect(failure?.operation == .mkdir)
                #expect(failure?.code == EACCES)
            }
            // Other operations were never affected; the third mkdir works.
            let fd = try fileSystem.open(at: root, "f", flags: O_WRONLY | O_CREAT, mode: 0o600)
            close(fd)
            try fileSystem.makeDirectory(at: root, "d", mode: 0o700)
            #expect(FileManager.default.fileExists(atPath: directory.path + "/d"))
            #expect(faulty.count(.mkdir) == 3, "failed calls are counted too")
        }
    }

    @Test func aFailingWriteCanWriteSomeBytesFirst() throws {
        try withOpenTemporaryDirectory { directory, root in
            let faulty = FaultyFileSystem()
            let fileSystem = faulty.fileSystem
            let fd = try fileSystem.open(at: root, "journal", flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600)
            defer { close(fd) }
            faulty.failNext(.write, errno: ENOSPC, afterBytes: 4)

            var failure: FileSystem.Failure?
            do throws(FileSystem.Failure) {
                try fileSystem.write(fd, bytes: Array("0123456789".utf8))
            } catch {
                failure = error
            }
            #expect(failure?.code == ENOSPC)
            #expect(failure?.operation == .write)
            #expect(try String(contentsOf: directory.url.appendingPathComponent("journal"), encoding: .utf8) == "0123")

            try fileSystem.write(fd, bytes: Array("!".utf8))
            #expect(try String(contentsOf: directory.url.appendingPathComponent("journal"), encoding: .utf8) == "0123!")
        }
    }

    @Test func faultsOfOneOperationFireInTheOrderTheyWereArmed() throws {
        try withOpenTemporaryDirectory { directory, root in
            let faulty = FaultyFileSystem()
            let fileSystem = faulty.fileSystem
            faulty.failNext(.open, errno: EIO)
            faulty.failNext(.open, errno: EMFILE)

            var codes: [Int32] = []
            for _ in 0..<3 {
                do throws(FileSystem.Failure) {
                    close(try fileSystem.open(at: root, "x", flags: O_RDONLY | O_CREAT, mode: 0o600))
                    codes.append(0)
                } catch {
                    codes.append(error.code)
                }
            }
            #expect(codes == [EIO, EMFILE, 0])
        }
    }
}
