import Foundation

/// The subcommands of `mirror-worker`, by name. Each takes the remaining arguments.
enum WorkerCommands {
    typealias Command = @Sendable ([String]) async throws -> Void

    static let all: [String: Command] = [
        "asset": { try await AssetCommand.run($0) },
        "echo": { arguments in print(arguments.joined(separator: " ")) },
        // Prints "waiting" and waits until it is killed (or its parent goes).
        "hold": { _ in
            FileHandle.standardOutput.write(Data("waiting\n".utf8))
            while true { try await Task.sleep(for: .seconds(3600)) }
        },
        "mirror": { try await MirrorCommand.run($0) },
        "mirror-cancel-race": { try await MirrorCancelRaceCommand.run($0) },
        "mirror-editor": { try await MirrorEditorCommand.run($0) },
        "mirror-retry": { try await MirrorRetryCommand.run($0) },
        "mirror-writer": { try await MirrorWriterCommand.run($0) },
        "read": { try await ReadCommand.run($0) },
        "open-close": { try await OpenCloseCommand.run($0) },
        "overlapping-read": { try await OverlappingReadCommand.run($0) },
        "relationships": { try await RelationshipCommand.run($0) },
        "sealed": { try await SealedCommand.run($0) },
        "versions": { try await VersionsCommand.run($0) },
        "watcher-fds": WatcherFDsCommand.run,
        "watcher-overflow": { try await WatcherOverflowCommand.run($0) },
        "watcher-overflow-deleted": { try await WatcherOverflowDeletedCommand.run($0) },
        "write": { try await WriteCommand.run($0) },
    ]
}
