import Dispatch
import Foundation

/// Runs blocking file work on a dispatch thread, so that it does not hold one of the few
/// threads tasks run on.
func runBlocking<Value: Sendable>(
    _ work: @escaping @Sendable () throws(MirrorError) -> Value
) async throws(MirrorError) -> Value {
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, MirrorError>, Never>) in
        DispatchQueue.global().async {
            do throws(MirrorError) {
                continuation.resume(returning: .success(try work()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try outcome.get()
}
