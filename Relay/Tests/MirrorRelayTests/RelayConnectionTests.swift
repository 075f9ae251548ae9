import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing

/// Connections that never finish a request are closed by the relay.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayConnectionTests {
    /// Connects to `port`, sends `text`, then reads until the relay closes the connection
    /// (`true`) or nothing came for `seconds` (`false`).
    static func isClosed(port: Int, after text: String, waitingUpTo seconds: Int) -> Bool {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return false }
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(text.utf8)
        guard send(fd, bytes, bytes.count, 0) == bytes.count else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = recv(fd, &buffer, buffer.count, 0)
            if read == 0 { return true }  // closed by the relay
            if read < 0 { return false }  // nothing for `seconds`
        }
    }

    @Test func aConnectionThatNeverFinishesItsHeadersIsClosed() async throws {
        try await RunningRelay.with { relay in
            let port = relay.url.port ?? 0
            let closed = await Task.detached {
                Self.isClosed(port: port, after: "POST /v1/commit HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n", waitingUpTo: 180)
            }.value
            #expect(closed)
            let health = try await relay.send("/health", method: "GET", token: nil)
            #expect(health.status == 200)
        }
    }
}
