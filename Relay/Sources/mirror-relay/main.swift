import Foundation
import MirrorRelayServer

// mirror-relay [options] | mirror-relay setup --admin-url URL --relay-role ROLE
// | mirror-relay token --subject USER | --help
let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment
if arguments.contains("--help") || arguments.contains("-h") {
    print(arguments.first == "token" ? RelayTokenCommand.help : RelayConfiguration.help)
    exit(0)
}
do {
    if arguments.first == "token" {
        print(try await RelayTokenCommand.token(arguments: Array(arguments.dropFirst()), environment: environment))
    } else if arguments.first == "setup" {
        try await RelayServer.setup(arguments: Array(arguments.dropFirst()), environment: environment)
    } else {
        try await RelayServer.run(try RelayConfiguration(arguments: arguments, environment: environment), environment: environment)
    }
} catch {
    FileHandle.standardError.write(Data("mirror-relay: \(error)\n".utf8))
    exit(1)
}
