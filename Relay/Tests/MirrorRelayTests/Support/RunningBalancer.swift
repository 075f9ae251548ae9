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

/// haproxy (from Debian's packages, installed by `Relay/Scripts/haproxy.sh` when missing) in
/// front of relays, as a child process of the test on a free port, in HTTP mode.
///
/// Its timeouts are longer than the relay's 5 s long-poll heartbeat and the client's 10 s
/// dead-link timeout, so that a long poll is never cut by the balancer. A request whose
/// relay refuses the connection goes to another relay at once (`option redispatch 1`), and a
/// relay that fails three health checks in a row (`GET /health`, every second) gets no more
/// requests.
final class RunningBalancer: Sendable {
    let process: Subprocess
    /// Where clients connect.
    let url: URL
    private let directory: URL

    private init(process: Subprocess, url: URL, directory: URL) {
        (self.process, self.url, self.directory) = (process, url, directory)
    }

    /// The script that prints haproxy's path, installing it first when it is missing.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/haproxy.sh")

    /// Starts haproxy in front of `relays` (servers `relay0`, `relay1`, … in their order)
    /// and waits until it answers `/health` through one of them.
    ///
    /// - Parameter balance: haproxy's `balance` algorithm: `roundrobin` sends each request
    ///   to the next relay; `source` sends every request of this machine to one relay.
    static func start(_ relays: [RunningRelay], balance: String = "roundrobin") async throws -> RunningBalancer {
        let installed = try await Subprocess.run(URL(fileURLWithPath: "/bin/bash"), [script.path], timeout: .seconds(600))
        let path = installed.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        guard installed.termination == .exited(0), !path.isEmpty else {
            throw SubprocessError("haproxy.sh \(installed.termination): \(installed.standardError)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-haproxy-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = try freeLoopbackPort()
        let servers = relays.enumerated().map { index, relay in
            "    server relay\(index) 127.0.0.1:\(relay.port) check inter 1s fall 3 rise 2"
        }
        let configuration = """
            global
                maxconn 1000
            defaults
                mode http
                timeout connect 5s
                timeout client 60s
                timeout server 60s
                timeout http-request 15s
                retries 3
                option redispatch 1
            listen relays
                bind 127.0.0.1:\(port)
                balance \(balance)
                stats enable
                stats uri \(statsPath)
                option httpchk GET /health
            \(servers.joined(separator: "\n"))

            """
        let file = directory.appendingPathComponent("haproxy.cfg")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let process = try Subprocess(URL(fileURLWithPath: path), ["-db", "-f", file.path])
        let balancer = RunningBalancer(process: process, url: URL(string: "http://127.0.0.1:\(port)")!, directory: directory)
        do {
            try await balancer.waitUntilServing()
        } catch {
            balancer.stop()
            throw error
        }
        return balancer
    }

    /// Runs `body` with haproxy in front of `relays`, stopped afterwards whatever happens.
    static func with<Result: Sendable>(
        _ relays: [RunningRelay], balance: String = "roundrobin", _ body: (RunningBalancer) async throws -> Result
    ) async throws -> Result {
        let balancer = try await start(relays, balance: balance)
        defer { balancer.stop() }
        return try await body(balancer)
    }

    /// Kills haproxy and removes its directory.
    func stop() {
        process.kill()
        try? FileManager.default.removeItem(at: directory)
    }

    private static let statsPath = "/haproxy-stats"

    /// The sessions each relay (`relay0`, …) holds now, and has served in all, as haproxy
    /// counts them.
    func sessions() async throws -> [String: (current: Int, total: Int)] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: url.absoluteString + Self.statsPath + ";csv")!)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        guard let header = lines.first?.trimmingPrefix("# ").split(separator: ",", omittingEmptySubsequences: false),
            let name = header.firstIndex(of: "svname"), let current = header.firstIndex(of: "scur"),
            let total = header.firstIndex(of: "stot")
        else { throw SubprocessError("haproxy's statistics are not CSV: \(lines.first ?? "")") }
        var sessions: [String: (current: Int, total: Int)] = [:]
        for line in lines.dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count > max(name, current, total), fields[name].hasPrefix("relay") else { continue }
            sessions[String(fields[name])] = (Int(fields[current]) ?? 0, Int(fields[total]) ?? 0)
        }
        return sessions
    }

    /// Waits until haproxy forwards `/health` to a relay (it takes a moment to bind and to
    /// check its servers), for up to 60 seconds.
    private func waitUntilServing() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            if let termination = process.termination {
                throw SubprocessError("haproxy \(termination): \(process.standardError)")
            }
            var request = URLRequest(url: URL(string: url.absoluteString + "/health")!, timeoutInterval: 5)
            request.httpMethod = "GET"
            if let (_, response) = try? await URLSession.shared.data(for: request),
                (response as? HTTPURLResponse)?.statusCode == 200
            {
                return
            }
            guard ContinuousClock.now < deadline else {
                throw SubprocessError("haproxy did not serve /health within 60 s: \(process.standardError)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
