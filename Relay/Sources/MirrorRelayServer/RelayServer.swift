import Foundation
import Hummingbird
import Logging
import NIOCore

/// `mirror-relay`: serves the protocol until the process is told to stop (SIGTERM, SIGINT).
public enum RelayServer {
    /// Runs the relay; prints `mirror-relay: listening on HOST:PORT` once it accepts
    /// requests.
    ///
    /// - Throws: ``RelayConfiguration/Problem`` for a configuration or role that cannot be
    ///   used; what the server throws.
    public static func run(_ configuration: RelayConfiguration, environment: [String: String]) async throws {
        var logger = Logger(label: "mirror-relay")
        logger.logLevel = environment["MIRROR_RELAY_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let users = RelayUsers(
            url: configuration.databaseURL, environment: environment, connections: configuration.connections, logger: logger)
        try await users.checkOwnRole()
        let hub = RelayHub()
        let routes = RelayRoutes(
            tokens: try await RelayTokens.make(configuration), users: users, hub: hub,
            maximumAssetBytes: configuration.maximumAssetBytes,
            budget: RelayBodyBudget(limit: configuration.maximumInflightBytes), logger: logger)
        let router = Router(context: RelayRequestContext.self)
        router.add(middleware: RelayErrorMiddleware())
        routes.add(to: router)
        let app = Application(
            router: router,
            // A connection idle this long, its request's head or body included, is closed: a
            // client that never finishes its headers holds no descriptor for long. A request
            // read in full and being answered (a long poll) is never idle.
            server: .http1(configuration: .init(idleTimeout: .seconds(RelayWireTiming.idleSeconds))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "mirror-relay"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                FileHandle.standardOutput.write(Data("mirror-relay: listening on \(configuration.host):\(port)\n".utf8))
            },
            logger: logger)
        let sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(RelayWireTiming.sweepSeconds))
                hub.sweep()
            }
        }
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                hub.beat()
            }
        }
        defer {
            sweeper.cancel()
            heartbeat.cancel()
        }
        try await app.runService()
        await users.close()
    }

    /// `mirror-relay setup`: installs the schemas and the relay role as an administrator.
    public static func setup(arguments: [String], environment: [String: String]) async throws {
        var flags: [String: String] = [:]
        var index = 0
        while index + 1 < arguments.count {
            flags[arguments[index]] = arguments[index + 1]
            index += 2
        }
        guard index == arguments.count, let admin = flags["--admin-url"], let role = flags["--relay-role"],
            flags.count == 2
        else {
            throw RelayConfiguration.Problem("setup takes --admin-url URL --relay-role ROLE")
        }
        try await RelaySetup.run(adminURL: admin, relayRole: role, environment: environment)
        print("mirror-relay: set up; run the relay as \(role)")
    }
}

/// How often the relay forgets dead sessions.
enum RelayWireTiming {
    static let sweepSeconds = 2
    /// How long a connection may send nothing, while sending a request or between requests.
    static let idleSeconds: Int64 = 15
}

/// The relay's request context: Hummingbird's basic one, and the request's connection, which
/// the relay closes under a stream whose client stopped reading (``RelayHub/beat(now:)``).
struct RelayRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
