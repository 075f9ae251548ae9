import Foundation
import Logging
import MagicMirror
import PostgresNIO
import Synchronization

/// Says to every process that this process is alive, so that a collection keeps the assets
/// its databases stored and have not committed a record for yet (`magicmirror.asset_holds`).
///
/// One per ``ServerLink``, shared by every database of the link (so a process, or a relay
/// storing for thousands of users, holds one such connection per endpoint, not one per
/// database). Started by the first store, it holds one connection of its own (not the
/// pool's) that holds an advisory lock (``AssetRows/presenceLockSpace``,
/// ``key(for:)``) and listens on it, so that it learns when the connection is lost: it
/// then connects again and takes the lock again (a new key, and the holds of the writers
/// it stored for moved to it, if another process took the old one meanwhile). The server
/// drops the lock when the process dies or its connection is cut, which is what lets a
/// collection remove what a dead writer left behind.
final class AssetPresence: Sendable {
    private struct State {
        var key: Int32?
        var waiters: [CheckedContinuation<Int32, any Error>] = []
        var task: Task<Void, Never>?
        var stopped = false
        /// The writers whose holds carry the key: moved with it.
        var writers: Set<String> = []
    }

    private let link: ServerLink
    private let logger: Logger
    private let state = Mutex(State())

    init(link: ServerLink, logger: Logger) {
        self.link = link
        self.logger = logger
    }

    /// The key of the lock this process holds, once it holds it, for holds of `writer`.
    func key(for writer: String) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Int32, any Error>? = state.withLock { state in
                if state.stopped { return .failure(MirrorError(.unavailable, "the database is closed")) }
                state.writers.insert(writer)
                if let key = state.key { return .success(key) }
                state.waiters.append(continuation)
                if state.task == nil { state.task = Task { [weak self] in await self?.hold() } }
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Ends the presence: the lock is released with its connection.
    func stop() {
        let (task, waiters) = state.withLock { state in
            state.stopped = true
            defer { state.waiters = [] }
            return (state.task, state.waiters)
        }
        task?.cancel()
        for waiter in waiters { waiter.resume(throwing: MirrorError(.unavailable, "the database is closed")) }
    }

    private func hold() async {
        var backoff = Listening.initialBackoff
        while !Task.isCancelled {
            do {
                // A connection of its own: held for as long as the database lives, it must
                // not take one of the pool's few.
                let connection = try await link.connect(applicationName: "magicmirror-assets")
                defer { Task { try? await connection.close() } }
                let key = try await lock(on: connection)
                backoff = Listening.initialBackoff
                let waiters = state.withLock { state in
                    state.key = key
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume(returning: key) }
                // Nothing is ever sent on this channel: the sequence ends when the
                // connection does.
                try await connection.listen(on: "magicmirror_presence") { notifications in
                    for try await _ in notifications {}
                }
            } catch {
                if Task.isCancelled { return }
                // Waiters keep waiting (a store waits for the server as a commit does).
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, Listening.maximumBackoff)
            }
        }
    }

    /// Takes this process's lock on `connection`: the key it had if it is free, another
    /// one otherwise (and its holds move to it).
    private func lock(on connection: PostgresConnection) async throws -> Int32 {
        let previous = state.withLock { $0.key }
        var key = previous ?? Int32.random(in: 1...Int32.max)
        while true {
            var taken = false
            for try await value in try await connection.query(
                "SELECT pg_try_advisory_lock(\(AssetRows.presenceLockSpace), \(key))", logger: logger
            ).decode(Bool.self) {
                taken = value
            }
            if taken { break }
            key = Int32.random(in: 1...Int32.max)
        }
        if let previous, previous != key {
            let writers = state.withLock { Array($0.writers) }
            try await connection.query(
                "UPDATE magicmirror.asset_holds SET lock_key = \(key) WHERE writer = ANY(\(writers))", logger: logger)
        }
        return key
    }
}
