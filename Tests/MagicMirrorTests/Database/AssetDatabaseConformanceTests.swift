import Foundation
import MagicMirror
import MirrorTesting
import Testing

/// The implementation requirements of ``AssetDatabase``, checked by the public conformance
/// suite on the JSON-file database (the only one the package ships that stores assets).
@Suite(.timeLimit(.minutes(5))) struct AssetDatabaseConformanceTests {
    @Test(arguments: AssetDatabaseConformance.checks)
    func conforms(to check: ConformanceCheck) async throws {
        try await check.run {
            let opened = try await DatabaseFactory.jsonFile.make()
            return DatabaseUnderTest(
                database: opened.database, otherWriter: opened.otherWriter,
                startNewGeneration: opened.compact, cleanup: { opened.cleanup() })
        }
    }

    @Test func everyRequirementHasAtLeastOneCheck() {
        #expect(Set(AssetDatabaseConformance.checks.compactMap(\.requirement)) == [1, 2, 3])
    }
}
