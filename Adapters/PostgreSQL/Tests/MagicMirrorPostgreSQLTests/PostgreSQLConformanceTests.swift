import MagicMirrorPostgreSQL
import MirrorTesting
import Testing

/// The public ``RecordDatabaseConformance`` and ``AssetDatabaseConformance`` suites,
/// unchanged, on a fresh database of the throwaway server for each check.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLConformanceTests {
    @Test(arguments: RecordDatabaseConformance.checks)
    func conforms(to check: ConformanceCheck) async throws {
        try await check.run { try await TestServer.databaseUnderTest() }
    }

    @Test(arguments: AssetDatabaseConformance.checks)
    func storesAssets(_ check: ConformanceCheck) async throws {
        try await check.run { try await TestServer.databaseUnderTest() }
    }
}
