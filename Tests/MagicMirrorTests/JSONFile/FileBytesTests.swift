import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// Bytes read from a file into memory of their own (`JSONFileIO.readBytes`): the same bytes
/// as a read into an array, fewer where the file ends, and from a megabyte on in memory
/// mapped for them alone (which freeing gives back without moving `malloc`'s threshold).
@Suite(.timeLimit(.minutes(5))) struct FileBytesTests {
    @Test(arguments: [0, 1, 4_096, FileBytes.mappedFrom - 1, FileBytes.mappedFrom, 3 * FileBytes.mappedFrom + 5])
    func readsWhatAnArrayReadReads(size: Int) throws {
        let directory = try TemporaryDirectory("file-bytes")
        defer { directory.remove() }
        let url = directory.url.appendingPathComponent("file")
        let contents = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try Data(contents).write(to: url)
        let fd = open(url.path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        let offset = size / 3
        let wanted = size - offset + 100  // past the end: the file is shorter
        let bytes = try JSONFileIO.readBytes(fd, from: offset, count: wanted)
        #expect(bytes.count == size - offset)
        #expect(Array(bytes.buffer) == Array(try JSONFileIO.read(fd, from: offset, count: wanted)))
        #expect(Array(bytes.buffer) == Array(contents[offset...]))
        #expect(bytes.isMapped == (wanted >= FileBytes.mappedFrom))
    }

    @Test func aFailedReadThrowsItsError() throws {
        #expect(throws: FileSystem.Failure.self) {
            _ = try JSONFileIO.readBytes(-1, from: 0, count: 10)
        }
    }
}
