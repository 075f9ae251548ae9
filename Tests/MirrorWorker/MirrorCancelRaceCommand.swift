import Foundation
import MagicMirror
import MirrorTestSupport
import MirrorTesting

/// `mirror-cancel-race`: cancels consumers of a mirror's `changes` and `errors` streams and
/// waiting `flush()` calls while other threads change the mirror, again and again; prints
/// `ok <rounds>` when done.
///
/// ```
/// mirror-cancel-race [--rounds N]
/// ```
///
/// A mirror that hands out a change (or resumes a flush) while it holds its lock must not
/// need that lock in the stream's termination handler or the flush's cancellation handler:
/// the cancelling thread holds the task's lock there, and the delivering thread needs it to
/// resume the task, so each would wait for the other for ever. The test that runs this
/// command kills it after a time limit, so such a deadlock fails the test instead of hanging
/// it.
enum MirrorCancelRaceCommand {
    static func run(_ arguments: [String]) async throws {
        let options = try WorkerOptions(arguments, usage: "mirror-cancel-race [--rounds N]")
        let rounds = try options.int("rounds", default: 2_000)
        let database = InMemoryDatabase()
        let mirror = try await Mirror<EditRecord>(database: database)
        for number in 0..<8 { mirror.dataModel.append(EditRecord(id: "r\(number)", owner: "race")) }
        try await mirror.flush()

        // Changes keep coming from two other threads while the main loop cancels.
        let stop = DispatchSemaphore(value: 0)
        let changers = (0..<2).map { thread in
            Thread {
                var value = 0
                while stop.wait(timeout: .now()) == .timedOut {
                    value += 1
                    let index = (value + thread) % 8
                    mirror.dataModel[index].p0 = value
                }
                stop.signal()
            }
        }
        for changer in changers { changer.start() }
        for _ in 0..<rounds {
            let changes = mirror.changes()
            let errors = mirror.errors()
            let consumer = Task {
                for await _ in changes {}
            }
            let errorConsumer = Task {
                for await _ in errors {}
            }
            let flusher = Task { try? await mirror.flush() }
            await Task.yield()
            consumer.cancel()
            errorConsumer.cancel()
            flusher.cancel()
            await consumer.value
            await errorConsumer.value
            await flusher.value
        }
        stop.signal()
        emitLine("ok \(rounds)")
    }
}
