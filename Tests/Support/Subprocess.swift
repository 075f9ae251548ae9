#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A child process for tests, started with `posix_spawn` and watched by threads of its own.
///
/// Foundation's `Process` on Linux loses termination and end-of-file notifications now and
/// then when many processes start at once from several threads (the tests here run in
/// parallel and start dozens): a test then waits for an exit that was never reported. This
/// type does the few things the tests need with plain system calls: one thread blocks in
/// `waitpid` for the exit, one thread per pipe blocks in `read`. Nothing it does can be lost
/// to a race with another child.
public final class Subprocess: Sendable {
    /// How a process ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        /// It called `exit` with this status.
        case exited(Int32)
        /// A signal killed it.
        case signaled(Int32)

        /// The exit status, or 128 + the signal, as a shell shows it.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        }

        public var description: String {
            switch self {
            case .exited(let code): "exited with \(code)"
            case .signaled(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// The child's process id.
    public let pid: pid_t
    /// The child's standard output, line by line (without the newline). One consumer.
    public let lines: AsyncStream<String>

    private let output = TextCollector()
    private let errors = TextCollector()
    private let ended = ExitState()
    /// The write end of the child's standard input, or -1.
    private let input: Mutex<Int32>
    private let errorsChanged: AsyncStream<Void>

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: Variables to set on top of this process's environment.
    ///   - inheritStandardError: Let the child write to this process's standard error
    ///     instead of capturing it.
    ///   - standardInput: Give the child a pipe on its standard input, written with
    ///     ``write(_:)``; otherwise it reads `/dev/null`.
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        inheritStandardError: Bool = false, standardInput: Bool = false
    ) throws {
        _ = ignoreBrokenPipes
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        var inPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0, inheritStandardError || pipe(&errPipe) == 0,
              !standardInput || pipe(&inPipe) == 0
        else {
            throw SubprocessError("pipe failed: \(String(cString: strerror(errno)))")
        }
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if standardInput {
            posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
            posix_spawn_file_actions_addclose(&actions, inPipe[0])
            posix_spawn_file_actions_addclose(&actions, inPipe[1])
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_addclose(&actions, outPipe[0])
        posix_spawn_file_actions_addclose(&actions, outPipe[1])
        if !inheritStandardError {
            posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
            posix_spawn_file_actions_addclose(&actions, errPipe[0])
            posix_spawn_file_actions_addclose(&actions, errPipe[1])
        }
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable.path, &actions, nil, argv, envp)
        close(outPipe[1])
        if !inheritStandardError { close(errPipe[1]) }
        if standardInput { close(inPipe[0]) }
        input = Mutex(standardInput ? inPipe[1] : -1)
        guard spawned == 0 else {
            if standardInput { close(inPipe[1]) }
            close(outPipe[0])
            if !inheritStandardError { close(errPipe[0]) }
            throw SubprocessError("cannot start \(executable.path): \(String(cString: strerror(spawned)))")
        }
        pid = child

        let (lines, lineSink) = AsyncStream.makeStream(of: String.self)
        self.lines = lines
        let (errorsChanged, errorSink) = AsyncStream.makeStream(
            of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.errorsChanged = errorsChanged

        let output = self.output
        Subprocess.readAll(outPipe[0]) { chunk in
            guard let chunk else {
                for line in output.finish() { lineSink.yield(line) }
                lineSink.finish()
                return
            }
            for line in output.append(chunk) { lineSink.yield(line) }
        }
        if !inheritStandardError {
            let errors = self.errors
            Subprocess.readAll(errPipe[0]) { chunk in
                guard let chunk else {
                    _ = errors.finish()
                    errorSink.yield()
                    errorSink.finish()
                    return
                }
                _ = errors.append(chunk)
                errorSink.yield()
            }
        } else {
            errorSink.finish()
        }
        let ended = self.ended
        let spawnedPID = child
        let waiter = Thread {
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(spawnedPID, &status, 0) } while result == -1 && errno == EINTR
            let termination: Termination = (status & 0x7f) == 0
                ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
            let waiters = ended.state.withLock { state in
                state.termination = termination
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: termination) }
        }
        waiter.start()
    }

    /// Reads `fd` to its end on a thread of its own, passing each chunk and then `nil`.
    private static func readAll(_ fd: Int32, _ deliver: @escaping @Sendable (Data?) -> Void) {
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    deliver(Data(buffer[0..<count]))
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            close(fd)
            deliver(nil)
        }
        reader.start()
    }

    /// Writes `text` to the child's standard input (see `standardInput:`); ignored once the
    /// input is closed or when the child reads nothing.
    public func write(_ text: String) {
        input.withLock { fd in
            guard fd >= 0 else { return }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Closes the child's standard input, so that it reads end-of-file.
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    deinit {
        closeInput()
    }

    /// Everything the child wrote to standard output so far.
    public var standardOutput: String { output.text }
    /// Everything the child wrote to standard error so far (empty when inherited).
    public var standardError: String { errors.text }

    /// Sends `signal` (SIGKILL by default) to the child, unless it has already been reaped.
    public func kill(_ signal: Int32 = SIGKILL) {
        ended.state.withLock { state in
            if state.termination == nil { _ = sendSignal(pid, signal) }
        }
    }

    /// How the child ended, once it has.
    public var termination: Termination? { ended.state.withLock { $0.termination } }

    /// Waits for the child to end. After `timeout` it is killed with SIGKILL (so a hung
    /// child fails the test instead of hanging it) and `SubprocessError` is thrown.
    @discardableResult
    public func wait(timeout: Duration = .seconds(60)) async throws -> Termination {
        let fired = Mutex(false)
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            fired.withLock { $0 = true }
            self.kill()
        }
        let termination = await withCheckedContinuation { continuation in
            let done = ended.state.withLock { state -> Termination? in
                if let termination = state.termination { return termination }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
        watchdog.cancel()
        if fired.withLock({ $0 }) {
            throw SubprocessError(
                "the child did not end within \(timeout) and was killed; standard error: \(standardError)")
        }
        return termination
    }

    /// Waits until standard error contains `text`.
    public func waitForStandardError(containing text: String, timeout: Duration) async throws {
        try await withSubprocessTimeout(timeout, "standard error never contained \(text.debugDescription)") {
            if self.standardError.contains(text) { return }
            for await _ in self.errorsChanged where self.standardError.contains(text) { return }
            if self.standardError.contains(text) { return }
            throw SubprocessError("standard error ended without \(text.debugDescription): \(self.standardError)")
        }
    }

    /// The next line of standard output, failing after `timeout` or when the process ends.
    public func nextLine(timeout: Duration = .seconds(60)) async throws -> String {
        try await withSubprocessTimeout(timeout, "no line on standard output; standard error: \(standardError)") {
            for await line in self.lines { return line }
            throw SubprocessError("the process ended; standard error: \(self.standardError)")
        }
    }

    /// Runs `executable` to its end and returns its termination and output.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) async throws -> (termination: Termination, standardOutput: String, standardError: String) {
        let process = try Subprocess(executable, arguments, environment: environment)
        let termination = try await process.wait(timeout: timeout)
        // The pipes end when the child (and anything it started) closed them.
        for await _ in process.lines {}
        await process.errorsEnded()
        return (termination, process.standardOutput, process.standardError)
    }

    private func errorsEnded() async {
        for await _ in errorsChanged {}
    }
}

/// How a child ended, and who waits for it.
final class ExitState: Sendable {
    let state = Mutex<(termination: Subprocess.Termination?, waiters: [CheckedContinuation<Subprocess.Termination, Never>])>((nil, []))
}

/// Collects a pipe's text and splits it into lines.
final class TextCollector: Sendable {
    private let state = Mutex<(all: Data, pending: Data)>((Data(), Data()))

    /// Adds a chunk; returns the lines it completed.
    func append(_ chunk: Data) -> [String] {
        state.withLock { state in
            state.all.append(chunk)
            state.pending.append(chunk)
            var lines: [String] = []
            while let newline = state.pending.firstIndex(of: 0x0A) {
                lines.append(String(decoding: state.pending[state.pending.startIndex..<newline], as: UTF8.self))
                state.pending.removeSubrange(state.pending.startIndex...newline)
            }
            return lines
        }
    }

    /// Ends the text; returns the last line if it had no newline.
    func finish() -> [String] {
        state.withLock { state in
            defer { state.pending = Data() }
            return state.pending.isEmpty ? [] : [String(decoding: state.pending, as: UTF8.self)]
        }
    }

    var text: String { state.withLock { String(decoding: $0.all, as: UTF8.self) } }
}

/// A failure of a child process in a test.
public struct SubprocessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with `message` when it takes longer than `timeout`.
public func withSubprocessTimeout<T: Sendable>(
    _ timeout: Duration, _ message: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw SubprocessError("timed out after \(timeout): \(message)")
        }
        return value
    }
}

#if canImport(Glibc)
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { Glibc.kill(pid, signal) }
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { Glibc.write(fd, bytes, count) }
#elseif canImport(Darwin)
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { Darwin.kill(pid, signal) }
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { Darwin.write(fd, bytes, count) }
#endif

/// Writing to a child that died must fail with EPIPE, not kill the test process.
private let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()
