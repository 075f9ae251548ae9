import Synchronization

/// Values appended from any thread (an observer's callback), read by the test.
final class ValueLog<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    init() {}

    func append(_ value: Value) { values.withLock { $0.append(value) } }

    var all: [Value] { values.withLock { $0 } }
}
