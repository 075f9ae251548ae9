import Foundation
import MagicMirror
import MagicMirrorPostgreSQL
import MirrorTesting

/// A record that carries a file.
struct Photo: Recordable {
    static let recordType = "Photo"
    var id: String
    var image: Asset
}

/// `pg-mirror-worker --photos URL`: a mirror of the public `Photo` zone driven line by line
/// from standard input, for the asset tests. Each command gets one line, `ok …` or
/// `error …`.
///
///     store PATH          stores the file as an asset: ok {"$asset":…,"size":…}
///     append ID ASSET     a new photo with that asset (its JSON)
///     committed           waits until nothing is pending
///     failing             waits until a pending change failed: ok KIND
///     read ID PATH        waits for photo ID and writes its asset's bytes to PATH, piece by
///                         piece: ok BYTES
///     file ID             the asset's local file: ok PATH
///     collect             removes the zone's unreferenced assets: ok COUNT
///     lasterror KIND      waits until the mirror's last error is of that kind: ok MESSAGE
///     ids                 the photos' ids: ok ID,ID,…
///     memory              the process's peak resident memory: ok MIB
enum PhotoWorker {
    static func run(url: String) async throws {
        let database = try await InteractiveWorker.openRetrying(url)
        let mirror = try await Mirror<Photo>(
            database: database,
            configuration: MirrorConfiguration(retryDelay: .milliseconds(100), maximumRetryDelay: .seconds(1)))
        InteractiveWorker.answer("ok ready \(database.writerID)")
        await InteractiveWorker.serve { line in try await perform(line, on: mirror) }
        await database.close()
    }

    private static func perform(_ line: String, on mirror: Mirror<Photo>) async throws -> String {
        let words = line.split(separator: " ", maxSplits: 2).map(String.init)
        let timeout = InteractiveWorker.timeout
        switch (words.first, words.count) {
        case ("store", 2):
            let asset = try await mirror.storeAsset(contentsOf: URL(fileURLWithPath: words[1]))
            return "ok " + String(decoding: try JSONEncoder().encode(asset), as: UTF8.self)
        case ("append", 3):
            let asset = try JSONDecoder().decode(Asset.self, from: Data(words[2].utf8))
            mirror.dataModel.append(Photo(id: words[1], image: asset))
        case ("committed", 1):
            try await mirror.waitUntilCommitted(timeout: timeout)
        case ("failing", 1):
            let pending = try await mirror.waitUntilPendingChanges(timeout: timeout, "a failed attempt") {
                $0.contains { $0.failedAttempts > 0 }
            }
            return "ok \(pending.lazy.compactMap(\.lastError).first.map { "\($0.kind)" } ?? "failed")"
        case ("read", 3):
            let photos = try await mirror.waitUntil(timeout: timeout, "photo \(words[1])") {
                $0.contains { $0.id == words[1] }
            }
            guard let photo = photos.first(where: { $0.id == words[1] }) else { return "error no photo" }
            _ = FileManager.default.createFile(atPath: words[2], contents: nil)
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: words[2]))
            defer { try? output.close() }
            var count = 0
            for try await piece in mirror.contents(of: photo.image) {
                try output.write(contentsOf: piece)
                count += piece.count
            }
            return "ok \(count)"
        case ("file", 2):
            guard let photo = mirror.dataModel.first(where: { $0.id == words[1] }) else { return "error no photo" }
            return "ok " + (try await mirror.fileURL(for: photo.image)).path
        case ("collect", 1):
            return "ok \(try await mirror.removeUnreferencedAssets())"
        case ("lasterror", 2):
            let error = try await mirror.waitForLastError(timeout: timeout) { "\($0.kind)" == words[1] }
            return "ok " + error.message.replacingOccurrences(of: "\n", with: " ")
        case ("ids", 1):
            return "ok " + mirror.dataModel.map(\.id).sorted().joined(separator: ",")
        case ("memory", 1):
            return "ok \(peakResidentMiB())"
        default:
            return "error unknown command \(line)"
        }
        return "ok"
    }
}

/// The process's peak resident memory in MiB (`VmHWM` of `/proc/self/status`; 0 where there
/// is none).
private func peakResidentMiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        if let kib = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) { return kib / 1024 }
    }
    return 0
}
