import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to a relay on the loopback address, written byte by byte: for requests
/// no HTTP client sends, such as one that never finishes its headers or its body. Blocking;
/// use it off the cooperative pool (`Task.detached` and a thread of its own, or briefly).
final class RawConnection: @unchecked Sendable {
    // The descriptor is set once and closed once (`disconnect()`); the tests use a connection
    // from one task at a time.
    private var fd: Int32

    /// Connects to `port`; `nil` when the connection fails.
    init?(port: Int) {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
    }

    deinit { disconnect() }

    /// Sends `text`; whether all of it was sent.
    func write(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return send(fd, bytes, bytes.count, 0) == bytes.count
    }

    /// Reads until the relay closes the connection (`true`) or nothing came for `seconds`
    /// (`false`).
    func isClosed(waitingUpTo seconds: Int) -> Bool {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = recv(fd, &buffer, buffer.count, 0)
            if read == 0 { return true }  // closed by the relay
            if read < 0 { return false }  // nothing for `seconds`
        }
    }

    /// Reads one response (its head, and as many bytes of body as its `Content-Length`
    /// says); what came, as text, when the relay closed the connection or nothing came for
    /// `seconds`.
    func response(waitingUpTo seconds: Int) -> String {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let length = text[..<end.lowerBound].split(separator: "\r\n")
                    .first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if text.utf8.count - text.utf8.distance(from: text.startIndex, to: end.upperBound) >= length { return text }
            }
            let read = recv(fd, &buffer, buffer.count, 0)
            if read <= 0 { return text }
            received += buffer[0..<read]
        }
    }

    /// The next bytes that come, or none when the relay closed the connection or nothing
    /// came for `seconds`.
    func receive(waitingUpTo seconds: Int) -> [UInt8] {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 16384)
        let read = recv(fd, &buffer, buffer.count, 0)
        return read > 0 ? Array(buffer[0..<read]) : []
    }

    /// Closes the connection (once).
    func disconnect() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }
}
