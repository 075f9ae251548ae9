import Foundation
import MagicMirror
import MirrorTesting
import Synchronization
import Testing

/// The implementation requirements of ``RecordDatabase``, checked on every implementation
/// the package ships (see `DatabaseFactory.all`) by the public conformance suite,
/// ``RecordDatabaseConformance``, which adapters in other packages run too. New checks go
/// into that suite (`Sources/MirrorTesting/Conformance/`), not here.
@Suite(.timeLimit(.minutes(5))) struct RecordDatabaseConformanceTests {
    @Test(arguments: RecordDatabaseConformance.checks, DatabaseFactory.all)
    func conforms(to check: ConformanceCheck, factory: DatabaseFactory) async throws {
        try await check.run {
            let opened = try await factory.make()
            return DatabaseUnderTest(
                database: opened.database, otherWriter: opened.otherWriter,
                startNewGeneration: opened.compact, cleanup: { opened.cleanup() })
        }
    }

    /// The suite is not empty, and every requirement of the protocol's list that a check
    /// can observe has one.
    @Test func everyRequirementHasAtLeastOneCheck() {
        let covered = Set(RecordDatabaseConformance.checks.compactMap(\.requirement))
        #expect(covered.isSuperset(of: [1, 2, 3, 4, 5, 7, 8, 10]))
        let names = RecordDatabaseConformance.checks.map(\.name)
        #expect(Set(names).count == names.count, "two checks share a name")
    }
}

/// Waits for the first element of `stream` that satisfies `predicate`, failing after
/// `timeout`.
func firstValue<Element: Sendable>(
    of stream: AsyncStream<Element>, within timeout: Duration,
    where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw MirrorError(.timedOut, "no matching element within \(timeout)")
        }
        return value
    }
}
