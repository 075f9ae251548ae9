import Foundation
import MagicMirror
import MirrorTestSupport
import Testing

/// An app on another host whose link to the relay is cut and healed: the relay in a network
/// namespace of its own (reaching PostgreSQL by its Unix socket), the app, `mirror-todo-relay
/// watch`, in another, joined by a veth link the test takes down and brings up.
@Suite(
    .timeLimit(.minutes(10)),
    .enabled(if: RelayTestServer.isAvailable, RelayTestServer.skipMessage),
    .enabled(
        "skipped: hosts need network namespaces, made as root with `ip netns` (iproute2), which this machine does not allow"
    ) { await HostNetwork.unavailability() == nil }
)
struct RelayNetworkTests {
    @Test func anAppWhoseLinkIsCutHearsOfItAndCatchesUpWhenItHeals() async throws {
        let network = try await HostNetwork.make(hosts: 1)
        var relay: RunningRelay?
        do {
            let started = try await RunningRelay.start(
                inNamespace: (network.server, HostNetwork.serverAddress(toHost: 1)))
            relay = started
            let subject = RelayTestServer.uniqueName("away")
            let environment = [
                "MAGICMIRROR_RELAY_URL": started.url.absoluteString,
                "MAGICMIRROR_RELAY_TOKEN": try await RelayTestServer.token(subject),
            ]
            let todo = BuiltProducts.executable("mirror-todo-relay").path
            let ip = try #require(HostNetwork.ip)
            /// `mirror-todo-relay` on the relay's host (the link to the app's host is not on its way).
            func add(_ title: String) async throws {
                let run = try await Subprocess.run(ip, ["netns", "exec", network.server, todo, "add", title], environment: environment)
                #expect(run.termination == .exited(0), "\(run.standardError)")
            }
            let watcher = try Subprocess(
                ip, ["netns", "exec", network.host(1), todo, "--json", "watch"], environment: environment)
            defer { watcher.kill() }
            try await watcher.waitForStandardError(containing: "watching", timeout: .seconds(60))
            func inserted() async throws -> String {
                let line = try await watcher.nextLine(timeout: .seconds(120))
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
                #expect(object["change"] as? String == "inserted", "\(line)")
                return object["title"] as? String ?? ""
            }
            try await add("before the cut")
            #expect(try await inserted() == "before the cut")

            // Cut: the app's long poll goes unanswered; it takes the link for dead, says so
            // once, and keeps trying. Meanwhile another writer adds an item.
            try await network.cut(host: 1)
            try await add("during the cut")
            try await watcher.waitForStandardError(containing: "lost the stream", timeout: .seconds(120))
            try await network.heal(host: 1)
            // Healed: the app polls again and pulls what it missed, then hears what follows.
            #expect(try await inserted() == "during the cut")
            try await add("after the heal")
            #expect(try await inserted() == "after the heal")
            #expect(watcher.standardError.components(separatedBy: "lost the stream").count == 2, "\(watcher.standardError)")
            watcher.kill(SIGINT)
            #expect(try await watcher.wait(timeout: .seconds(60)) == .exited(0))
            await started.stop()
            await network.remove()
        } catch {
            await relay?.stop()
            await network.remove()
            throw error
        }
    }
}
