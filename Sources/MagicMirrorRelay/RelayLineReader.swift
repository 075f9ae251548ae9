import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MagicMirror
import Synchronization

/// One streamed answer read line by line, through a `URLSession` data delegate (the same
/// on Apple platforms and on Linux, where FoundationNetworking has no `bytes(for:)`).
///
/// A 2xx answer's lines (each ended by `\n`) go to `line` as they arrive, on the session's
/// delegate queue, in order. Any other answer's body is kept (at most
/// ``maximumErrorBytes``) and returned with its status. The read ends when the answer ends,
/// when ``cancel(_:)`` is called, or when nothing arrived for `silence` seconds: the link is
/// then taken for dead.
final class RelayLineReader: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: the mutable state is behind `state`; the rest is set once in init.

    /// Why a read ended before its answer did.
    enum Ending: Sendable {
        /// ``cancel(_:)`` asked for it: the caller reads again at once.
        case cancelled
        /// Nothing arrived for the silence allowed.
        case silent
        /// A line longer than any of the protocol's: the answer is not the protocol's.
        case malformed
    }

    private struct State {
        var status = 0
        var pending = Data()
        var errorBody = Data()
        var lastHeard = ContinuousClock.now
        var ending: Ending?
        var done: CheckedContinuation<(status: Int, errorBody: Data, ending: Ending?), any Error>?
        var task: URLSessionTask?
    }

    static let maximumErrorBytes = 64 * 1024
    /// The longest line kept while waiting for its end: a line past it is a broken answer.
    static let maximumLineBytes = 16 * 1024 * 1024

    private let state = Mutex(State())
    private let line: @Sendable (Data) -> Void

    init(line: @escaping @Sendable (Data) -> Void) {
        self.line = line
    }

    /// Sends `request` on a session of its own (made from `configuration`) and reads the
    /// answer to its end.
    ///
    /// - Returns: The answer's status; for a status other than 2xx, its body; and why the
    ///   read ended early, if it did.
    /// - Throws: The session's error when the request failed otherwise.
    func read(
        _ request: URLRequest, configuration: URLSessionConfiguration, silence: Duration
    ) async throws -> (status: Int, errorBody: Data, ending: Ending?) {
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        // The session holds its delegate until it is invalidated.
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        let watchdog = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                guard let self else { return }
                if ContinuousClock.now - self.state.withLock({ $0.lastHeard }) > silence { self.cancel(.silent) }
            }
        }
        defer { watchdog.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let cancelled = state.withLock { state -> Ending? in
                if let ending = state.ending { return ending }
                state.done = continuation
                state.task = task
                state.lastHeard = .now
                return nil
            }
            if let cancelled {
                continuation.resume(returning: (status: 0, errorBody: Data(), ending: cancelled))
            } else {
                task.resume()
            }
        }
    }

    /// Ends the read, or the read about to start (the caller learns `ending` from
    /// ``read(_:configuration:silence:)``).
    func cancel(_ ending: Ending) {
        let task = state.withLock { state -> URLSessionTask? in
            guard state.ending == nil else { return nil }
            state.ending = ending
            return state.task
        }
        task?.cancel()
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        state.withLock { state in
            state.status = (response as? HTTPURLResponse)?.statusCode ?? 0
            state.lastHeard = .now
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let (lines, overlong) = state.withLock { state -> ([Data], Bool) in
            state.lastHeard = .now
            guard (200..<300).contains(state.status) else {
                state.errorBody.append(data.prefix(Self.maximumErrorBytes - state.errorBody.count))
                return ([], false)
            }
            state.pending.append(data)
            var lines: [Data] = []
            while let newline = state.pending.firstIndex(of: 0x0A) {
                lines.append(state.pending[state.pending.startIndex..<newline])
                state.pending.removeSubrange(state.pending.startIndex...newline)
            }
            return (lines, state.pending.count > Self.maximumLineBytes)
        }
        if overlong {
            cancel(.malformed)
            return
        }
        for received in lines { line(received) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, outcome) = state.withLock { state in
            defer { state.done = nil }
            return (state.done, (state.status, state.errorBody, state.ending))
        }
        guard let continuation else { return }
        if let error, outcome.2 == nil {
            continuation.resume(throwing: error)
        } else {
            continuation.resume(returning: (status: outcome.0, errorBody: outcome.1, ending: outcome.2))
        }
    }
}
