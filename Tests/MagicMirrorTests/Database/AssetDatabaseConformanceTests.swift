import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// The implementation requirements of ``AssetDatabase``, checked by the public conformance
/// suite on every database the package ships: the JSON-file one and the in-memory one.
@Suite(.timeLimit(.minutes(5))) struct AssetDatabaseConformanceTests {
    @Test(arguments: AssetDatabaseConformance.checks, DatabaseFactory.all)
    func conforms(to check: ConformanceCheck, factory: DatabaseFactory) async throws {
        try await check.run {
            let opened = try await factory.make()
            return DatabaseUnderTest(
                database: opened.database, otherWriter: opened.otherWriter,
                startNewGeneration: opened.compact, cleanup: { opened.cleanup() })
        }
    }

    @Test func everyRequirementHasAtLeastOneCheck() {
        #expect(Set(AssetDatabaseConformance.checks.compactMap(\.requirement)) == [1, 2, 3])
    }
}
