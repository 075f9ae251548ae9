import Synchronization

extension JSONFileDatabase {
    /// Runs `body` while this engine's in-process hold on a zone's files is taken, as a
    /// catch-up or commit on another thread would hold it. For the package's tests of what
    /// other threads see meanwhile; not a public API.
    package func whileZoneIsBusy<Result>(_ zone: ZoneID, _ body: () throws -> Result) throws -> Result {
        let zoneFiles = try engine.zone(zone)
        try zoneFiles.load()
        return try zoneFiles.disk.withLock { _ in try body() }
    }
}
