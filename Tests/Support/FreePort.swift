import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A free TCP port of 127.0.0.1 (bound, read, released), for a server that must be told its
/// port before it starts.
public func freeLoopbackPort() throws -> Int {
    let (descriptor, port) = try socketOnFreeLoopbackPort()
    close(descriptor)
    return port
}

/// A TCP socket bound to a free port of 127.0.0.1 (not listening), and the port: a port
/// that stays taken while the socket is open. The caller closes it.
public func socketOnFreeLoopbackPort() throws -> (descriptor: Int32, port: Int) {
    #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw SubprocessError("socket failed: \(String(cString: strerror(errno)))") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(descriptor, raw, length) == 0 && getsockname(descriptor, raw, &length) == 0
        }
    }
    guard bound else {
        let reason = String(cString: strerror(errno))
        close(descriptor)
        throw SubprocessError("could not find a free port: \(reason)")
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}
