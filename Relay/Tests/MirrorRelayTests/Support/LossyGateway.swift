#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MirrorTestSupport
import Synchronization

/// A gateway in front of one relay that loses the answer to the first commit: it forwards
/// the commit, the relay stores it, and the client gets `502 Bad Gateway`, as it does from
/// haproxy when a relay dies between storing a commit and answering. Every other request is
/// forwarded and answered. It keeps the `Idempotency-Key` of every commit it forwards.
///
/// Plain sockets, a thread per connection: HTTP/1.1 requests with a `Content-Length` body,
/// as `URLSession` sends them.
final class LossyGateway: Sendable {
    let url: URL
    private let relay: URL
    private let listener: Int32
    private let state = Mutex<(lostOne: Bool, keys: [String])>((false, []))

    /// The `Idempotency-Key` of each commit forwarded, in order.
    var commitKeys: [String] { state.withLock { $0.keys } }

    init(relay: URL) throws {
        self.relay = relay
        #if canImport(Glibc)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let listener = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(listener, raw, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, raw, &length) == 0
            }
        }
        guard listening else {
            close(listener)
            throw SubprocessError("the gateway could not listen")
        }
        self.listener = listener
        url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")!
        let accepting = Thread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // closed by stop()
                Thread { self.serve(connection) }.start()
            }
        }
        accepting.start()
    }

    /// Stops accepting connections.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Serves the requests of one connection until it closes.
    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var buffer = Data()
        while let (head, body) = Self.readRequest(connection, &buffer) {
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ")
            guard parts.count >= 2 else { return }
            var request = URLRequest(url: URL(string: relay.absoluteString + parts[1])!, timeoutInterval: 60)
            request.httpMethod = String(parts[0])
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces)
                if ["host", "content-length", "connection"].contains(name.lowercased()) { continue }
                request.setValue(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces), forHTTPHeaderField: name)
            }
            request.httpBody = body
            let isCommit = parts[1] == "/v1/commit"
            if isCommit, let key = request.value(forHTTPHeaderField: "Idempotency-Key") {
                state.withLock { $0.keys.append(key) }
            }
            let (status, answer) = Self.forward(request)
            let lose = isCommit && state.withLock { state in
                defer { state.lostOne = true }
                return !state.lostOne
            }
            if lose {
                Self.write(connection, Data("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                return
            }
            Self.write(
                connection,
                Data("HTTP/1.1 \(status) Answer\r\nContent-Type: application/json\r\nContent-Length: \(answer.count)\r\n\r\n".utf8)
                    + answer)
        }
    }

    /// Sends `request` to the relay and waits for its answer (this is a thread of its own).
    private static func forward(_ request: URLRequest) -> (Int, Data) {
        let answer = Mutex<(Int, Data)>((502, Data()))
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, response, _ in
            answer.withLock { $0 = ((response as? HTTPURLResponse)?.statusCode ?? 502, data ?? Data()) }
            done.signal()
        }.resume()
        done.wait()
        return answer.withLock { $0 }
    }

    /// The next request's head and body, or `nil` when the connection ends.
    private static func readRequest(_ connection: Int32, _ buffer: inout Data) -> (String, Data)? {
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil {
            guard read(connection, into: &buffer) else { return nil }
        }
        let end = buffer.range(of: separator)!
        let head = String(decoding: buffer[buffer.startIndex..<end.lowerBound], as: UTF8.self)
        let length = head.components(separatedBy: "\r\n").compactMap { line -> Int? in
            let pair = line.split(separator: ":", maxSplits: 1)
            guard pair.count == 2, pair[0].lowercased() == "content-length" else { return nil }
            return Int(pair[1].trimmingCharacters(in: .whitespaces))
        }.first ?? 0
        buffer = Data(buffer[end.upperBound...])
        while buffer.count < length {
            guard read(connection, into: &buffer) else { return nil }
        }
        let body = Data(buffer.prefix(length))
        buffer = Data(buffer.dropFirst(length))
        return (head, body)
    }

    private static func read(_ connection: Int32, into buffer: inout Data) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(connection, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    private static func write(_ connection: Int32, _ data: Data) {
        var remaining = [UInt8](data)[...]
        while !remaining.isEmpty {
            #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)  // a client gone is no SIGPIPE
            #else
            let flags: Int32 = 0
            #endif
            let sent = remaining.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, flags) }
            guard sent > 0 else { return }
            remaining = remaining.dropFirst(sent)
        }
    }
}
