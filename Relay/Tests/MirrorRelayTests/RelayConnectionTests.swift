import Foundation
import Testing

/// Connections that never finish a request are closed by the relay.
@Suite(.timeLimit(.minutes(10)), .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage))
struct RelayConnectionTests {
    /// Connects to `port`, sends `text`, then reads until the relay closes the connection
    /// (`true`) or nothing came for `seconds` (`false`).
    static func isClosed(port: Int, after text: String, waitingUpTo seconds: Int) -> Bool {
        guard let connection = RawConnection(port: port), connection.write(text) else { return false }
        return connection.isClosed(waitingUpTo: seconds)
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
