#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing

/// Runs `body` with a new temporary directory and an open descriptor of it, for calls
/// relative to it; both go away afterwards.
func withOpenTemporaryDirectory(_ body: (TemporaryDirectory, Int32) throws -> Void) throws {
    let directory = try TemporaryDirectory("filesystem")
    defer { directory.remove() }
    let fd = open(directory.path, O_RDONLY | O_DIRECTORY)
    try #require(fd >= 0)
    defer { close(fd) }
    try body(directory, fd)
}
