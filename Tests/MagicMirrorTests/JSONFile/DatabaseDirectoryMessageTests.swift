import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// Opening a JSON-file database where it cannot be made says why in terms of the database,
/// not of a temporary file (issue #36, point 8).
@Suite(.timeLimit(.minutes(5))) struct DatabaseDirectoryMessageTests {
    @Test func aFileWhereTheDirectoryShouldBeIsNamedAsSuch() throws {
        let directory = try TemporaryDirectory("file-not-directory")
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("notes.txt")
        try Data("hello\n".utf8).write(to: file)
        let error = #expect(throws: MirrorError.self) { _ = try JSONFileDatabase(directory: file) }
        #expect(error?.message == "\(file.path) is a file, not a directory: a JSON-file database is a directory")
        #expect(error?.file == file.path)
    }

    @Test func aDirectoryWhereDatabaseJSONCannotBeCreatedSaysSo() throws {
        let directory = try TemporaryDirectory("read-only-root")
        defer { directory.remove() }
        let faulty = FaultyFileSystem()
        faulty.failNext(.open, errno: EACCES, skipping: 1)   // reading database.json finds none
        let error = #expect(throws: MirrorError.self) {
            _ = try JSONFileDatabase(isolatedDirectory: directory.url, fileSystem: faulty.fileSystem)
        }
        #expect(error?.kind == .permissionDenied)
        let root = try #require(error?.file).replacingOccurrences(of: "/database.json", with: "")
        #expect(error?.message == "cannot create database.json, which makes \(root) a database: Permission denied "
            + "(the directory is read-only for this process)")
        #expect(error?.file?.hasSuffix("/database.json") == true)
        #expect(error.map { "\($0)" }?.contains(".tmp-") == false)
    }
}
