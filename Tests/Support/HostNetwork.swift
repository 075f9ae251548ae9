#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Network namespaces that stand for machines: a server's, and hosts each joined to it by
/// a veth link of its own, which a test cuts and heals (`ip link set … down`/`up`).
///
/// ```
///   host 1 (10.203.1.2) ──veth── (10.203.1.1) server (10.203.2.1) ──veth── (10.203.2.2) host 2
/// ```
///
/// Names are unique per run (`magicmirror-<pid>-<random>-…`), so runs in parallel never
/// meet; ``remove()`` deletes the namespaces, and with them the veth links inside. Making
/// them needs root and `ip` (iproute2); ``isAvailable`` says whether this machine allows it.
public struct HostNetwork: Sendable {
    /// The prefix of this network's namespace names.
    public let prefix: String
    /// How many hosts there are, numbered from 1.
    public let hosts: Int

    /// `ip`, where iproute2 installs it.
    public static let ip: URL? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
        .map { URL(fileURLWithPath: $0) }

    /// The namespace prefix of every network made here; the process id follows.
    private static let namePrefix = "magicmirror-"

    /// Why namespaces cannot be made here, or `nil` when they can: root, `ip`, and a probe
    /// namespace made, entered and deleted.
    public static func unavailability() async -> String? {
        guard geteuid() == 0 else { return "not running as root" }
        guard let ip else { return "no ip command (iproute2)" }
        let probe = "\(namePrefix)\(getpid())-probe-\(UInt32.random(in: 0...UInt32.max))"
        guard let made = try? await Subprocess.run(ip, ["netns", "add", probe], timeout: .seconds(60)),
              made.termination == .exited(0)
        else { return "ip netns add failed (no CAP_SYS_ADMIN?)" }
        let entered = try? await Subprocess.run(ip, ["netns", "exec", probe, "/bin/true"], timeout: .seconds(60))
        _ = try? await Subprocess.run(ip, ["netns", "delete", probe], timeout: .seconds(60))
        guard entered?.termination == .exited(0) else { return "ip netns exec failed" }
        return nil
    }

    /// The namespace of the server.
    public var server: String { prefix + "-server" }
    /// The namespace of host `number` (from 1).
    public func host(_ number: Int) -> String { prefix + "-host\(number)" }
    /// The server's address on the link to host `number`.
    public static func serverAddress(toHost number: Int) -> String { "10.203.\(number).1" }
    /// The interface of host `number`'s end of its link, inside its namespace.
    private static let hostEnd = "toserver"
    private static func serverEnd(_ number: Int) -> String { "tohost\(number)" }

    /// Makes the namespaces and links, all up; removes what it made if a step fails.
    public static func make(hosts: Int = 2) async throws -> HostNetwork {
        await removeLeftovers()
        let network = HostNetwork(
            prefix: "\(namePrefix)\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))",
            hosts: hosts)
        do {
            try await ip(["netns", "add", network.server])
            try await ip(["-n", network.server, "link", "set", "lo", "up"])
            for number in 1...hosts {
                let host = network.host(number)
                try await ip(["netns", "add", host])
                try await ip(["-n", host, "link", "set", "lo", "up"])
                try await ip([
                    "-n", network.server, "link", "add", serverEnd(number), "type", "veth",
                    "peer", "name", hostEnd, "netns", host,
                ])
                try await ip(["-n", network.server, "addr", "add", "10.203.\(number).1/24", "dev", serverEnd(number)])
                try await ip(["-n", host, "addr", "add", "10.203.\(number).2/24", "dev", hostEnd])
                try await ip(["-n", network.server, "link", "set", serverEnd(number), "up"])
                try await ip(["-n", host, "link", "set", hostEnd, "up"])
            }
            return network
        } catch {
            await network.remove()
            throw error
        }
    }

    /// Cuts host `number`'s link: nothing passes between it and the server until ``heal(host:)``.
    public func cut(host number: Int) async throws {
        try await Self.ip(["-n", host(number), "link", "set", Self.hostEnd, "down"])
    }

    /// Brings host `number`'s link back up.
    public func heal(host number: Int) async throws {
        try await Self.ip(["-n", host(number), "link", "set", Self.hostEnd, "up"])
    }

    /// Makes the server's kernel forget its TCP sockets to host `number` (`ss -K`), as it
    /// does when a cut outlasts the retransmissions of a restarted server's goodbyes: the
    /// reset it sends is lost while the link is cut, so the host's end stays established.
    public func forgetSockets(toHost number: Int) async throws {
        guard let ip = Self.ip else { throw SubprocessError("no ip command") }
        let (termination, _, errors) = try await Subprocess.run(
            ip, ["netns", "exec", server, "ss", "-K", "dst", "10.203.\(number).2"], timeout: .seconds(60))
        guard termination == .exited(0) else { throw SubprocessError("ss -K \(termination): \(errors)") }
    }

    /// Deletes the namespaces (and the veth links in them). Processes still in one keep it
    /// alive without a name until they end.
    public func remove() async {
        for namespace in [server] + (1...max(hosts, 1)).map(host) {
            _ = try? await Self.ip(["netns", "delete", namespace])
        }
    }

    /// Deletes the namespaces of earlier runs whose process is gone (a run killed before it
    /// could clean up).
    private static func removeLeftovers() async {
        guard let ip, let listed = try? await Subprocess.run(ip, ["netns", "list"], timeout: .seconds(60)) else { return }
        for line in listed.standardOutput.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix(namePrefix),
                  let pid = Int32(name.dropFirst(namePrefix.count).prefix { $0 != "-" }),
                  kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            _ = try? await Subprocess.run(ip, ["netns", "delete", name], timeout: .seconds(60))
        }
    }

    /// Runs `ip` with `arguments`; throws when it fails.
    private static func ip(_ arguments: [String]) async throws {
        guard let ip else { throw SubprocessError("no ip command") }
        let (termination, _, errors) = try await Subprocess.run(ip, arguments, timeout: .seconds(60))
        guard termination == .exited(0) else {
            throw SubprocessError("ip \(arguments.joined(separator: " ")) \(termination): \(errors)")
        }
    }
}
