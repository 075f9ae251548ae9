#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MirrorTestSupport
import MagicMirror
import Synchronization
import Testing

// Helpers of the Reliability* suites: the switch for the long run, the figures line, and
// byte-exact pictures of a directory. The record types they share with `mirror-worker` are
// in MirrorTestSupport (Tests/Support/ReliabilityRecords.swift).

enum Reliability {
    /// Whether the long run was asked for: `MAGICMIRROR_RELIABILITY_LONG=1`.
    static var isLongRun: Bool {
        ProcessInfo.processInfo.environment["MAGICMIRROR_RELIABILITY_LONG"] == "1"
    }

    /// The seed of the random choices: `MAGICMIRROR_RELIABILITY_SEED` when set, else random.
    static var seed: UInt64 {
        if let text = ProcessInfo.processInfo.environment["MAGICMIRROR_RELIABILITY_SEED"], let seed = UInt64(text) {
            return seed
        }
        return UInt64.random(in: 1...UInt64(UInt32.max))
    }

    /// Prints one line of figures that RELIABILITY.md quotes, e.g.
    /// `RELIABILITY crash: runs=25 kills=24 records-checked=2712 records-lost=0`.
    static func report(_ scenario: String, _ figures: KeyValuePairs<String, Any>) {
        let text = figures.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        print("RELIABILITY \(scenario): \(text)")
    }

    /// Every file below `directory` with its bytes (directories as `nil`), by relative path:
    /// to prove that something left the files byte for byte as they were.
    static func picture(of directory: URL) throws -> [String: Data?] {
        var picture: [String: Data?] = [:]
        let paths = try FileManager.default.subpathsOfDirectory(atPath: directory.path)
        for path in paths {
            let url = directory.appendingPathComponent(path)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            picture[path] = isDirectory.boolValue ? .some(nil) : try Data(contentsOf: url)
        }
        return picture
    }

    /// Whether the process runs as root, where file permissions do not restrict.
    static var isRoot: Bool { geteuid() == 0 }

    /// `setpriv`, to run a worker as an unprivileged user when the tests run as root.
    static var setpriv: String? {
        ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The quarantine files of a zone directory with a suffix (`.bad`, `.torn`).
    static func quarantined(in zoneDirectory: URL, suffix: String) -> [URL] {
        JSONFileTestSupport.names(in: zoneDirectory)
            .filter { $0.hasPrefix("quarantine-") && $0.hasSuffix(suffix) }
            .map { zoneDirectory.appendingPathComponent($0) }
    }

    /// The records of a zone as stored in its files, as `jq` sees them: the snapshot's
    /// records and the current generation's journal lines, with repeats. Every line must
    /// parse.
    static func storedLines(in zoneDirectory: URL) throws -> (snapshot: [[String: Any]], journal: [[String: Any]]) {
        let snapshotURL = zoneDirectory.appendingPathComponent("snapshot.json")
        var snapshot: [[String: Any]] = []
        var generation = 0
        if FileManager.default.fileExists(atPath: snapshotURL.path) {
            let object = try JSONFileTestSupport.jsonObject(snapshotURL)
            snapshot = object["records"] as? [[String: Any]] ?? []
            generation = object["generation"] as? Int ?? 0
        }
        let journalURL = zoneDirectory.appendingPathComponent("journal-\(generation).ndjson")
        let journal = FileManager.default.fileExists(atPath: journalURL.path)
            ? try JSONFileTestSupport.jsonLines(journalURL) : []
        return (snapshot, journal)
    }
}

/// Collects the `.mirrorError` notifications of one test: those about a file under its
/// directory, or naming one of its record ids (tests run in parallel and share
/// `NotificationCenter.default`).
func reliabilityErrors(under directory: URL, orNaming ids: [String] = []) -> ErrorNotificationCollector {
    let prefixes = [directory.resolvingSymlinksInPath().path, directory.path]
    let wanted = Set(ids)
    return ErrorNotificationCollector { error in
        if let file = error.file, prefixes.contains(where: { file.hasPrefix($0) }) { return true }
        return !wanted.isDisjoint(with: error.recordIDs)
    }
}

/// `mirror.flush()`, failing with ``TimedOut`` instead of waiting for ever.
func flush<Record: Recordable>(_ mirror: Mirror<Record>, within timeout: Duration = testTimeout) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await mirror.flush()
            return true
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return false
        }
        defer { group.cancelAll() }
        guard try await group.next() == true else {
            throw TimedOut(description: "flush() did not return within \(timeout); pending: \(mirror.pendingChanges)")
        }
    }
}
