#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
@testable import MagicMirror
import MirrorTestSupport
import Testing

/// Assets shared by real processes: `mirror-worker asset` stores, commits, deletes and is
/// killed with SIGKILL; the test reads and collects through its own mirror.
@Suite(.timeLimit(.minutes(5))) struct AssetProcessTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory("asset-processes") }

    private var assetsDirectory: URL { directory.url.appendingPathComponent("public/AssetRecord/assets") }

    private func assetFiles() -> [String] {
        JSONFileTestSupport.names(in: assetsDirectory).filter { Asset.isDigest($0) }.sorted()
    }

    /// The names in `assets` other than asset files and the lock: temporary files, leases.
    private func leftovers() -> [String] {
        JSONFileTestSupport.names(in: assetsDirectory).filter { !Asset.isDigest($0) && $0 != "lock" }
    }

    /// A mirror of this test's database, with an engine of its own (as another process has).
    private func openMirror() async throws -> Mirror<AssetRecord> {
        try await Mirror<AssetRecord>(database: try JSONFileDatabase(isolatedDirectory: directory.url))
    }

    /// A started `mirror-worker asset` and the lines it printed.
    private final class Worker: Sendable {
        let process: WorkerProcess
        let lines = AsyncCollector<String>()

        init(_ directory: TemporaryDirectory, _ arguments: [String] = []) async throws {
            process = try WorkerProcess(["asset", "--db", directory.path] + arguments, input: true)
            let lines = self.lines, stream = process.lines
            Task {
                for await line in stream { lines.append(line) }
                lines.finish()
            }
            try await lines.wait("the worker to load") { $0.contains { $0.hasPrefix("ready ") } }
        }

        /// Asks the worker to quit and expects it to exit normally.
        func quit(sourceLocation: SourceLocation = #_sourceLocation) async throws {
            try process.send("quit")
            #expect(try await process.waitForExit() == 0, sourceLocation: sourceLocation)
        }

        /// Sends a command and waits for the line that starts with `reply`.
        func send(_ command: String, expecting reply: String) async throws {
            try process.send(command)
            try await lines.wait("\(command) → \(reply)") { lines in
                lines.contains { $0.hasPrefix(reply) || $0.hasPrefix("error ") }
            }
            if let error = lines.items.first(where: { $0.hasPrefix("error ") }) {
                Issue.record("the worker failed: \(error)")
            }
        }
    }

    @Test func anAssetStoredAndCommittedByAnotherProcessIsReadHere() async throws {
        defer { directory.remove() }
        let mirror = try await openMirror()
        let worker = try await Worker(directory)
        try await worker.send("store photo 3000001", expecting: "stored photo")
        try await worker.send("commit photo", expecting: "committed photo")
        try await waitUntil(mirror, "the record of the other process") { $0.count == 1 }
        let record = try #require(mirror.dataModel.first)
        #expect(try await mirror.data(for: record.file) == AssetPayload.bytes(name: "photo", size: 3_000_001))
        try await worker.quit()
    }

    @Test func collectionKeepsWhatALiveProcessStoredAndRemovesItOnceNoRecordRefersToIt() async throws {
        defer { directory.remove() }
        let mirror = try await openMirror()
        let worker = try await Worker(directory)
        try await worker.send("store photo 100000", expecting: "stored photo")
        let digest = SHA256.hex(of: AssetPayload.bytes(name: "photo", size: 100_000))
        // Stored, not committed: the worker's lease keeps it.
        #expect(try await mirror.removeUnreferencedAssets() == 0)
        #expect(assetFiles() == [digest])

        try await worker.send("commit photo", expecting: "committed photo")
        #expect(try await mirror.removeUnreferencedAssets() == 0)
        #expect(assetFiles() == [digest])

        try await worker.send("delete photo", expecting: "deleted photo")
        #expect(try await mirror.removeUnreferencedAssets() == 1)
        #expect(assetFiles().isEmpty)
        try await worker.quit()
    }

    @Test func whatAKilledProcessStoredWithoutARecordIsCollected() async throws {
        defer { directory.remove() }
        let mirror = try await openMirror()
        let worker = try await Worker(directory)
        try await worker.send("store kept 5000", expecting: "stored kept")
        try await worker.send("commit kept", expecting: "committed kept")
        try await worker.send("store orphan 5000", expecting: "stored orphan")
        worker.process.kill()
        _ = try await worker.process.waitForExit()
        #expect(assetFiles().count == 2)
        #expect(try await mirror.removeUnreferencedAssets() == 1)
        #expect(assetFiles() == [SHA256.hex(of: AssetPayload.bytes(name: "kept", size: 5000))])
        #expect(leftovers().isEmpty)
        try await waitUntil(mirror, "the kept record") { $0.count == 1 }
        #expect(try await mirror.data(for: mirror.dataModel[0].file) == AssetPayload.bytes(name: "kept", size: 5000))
    }

    /// A collection runs again and again while another process stores and commits assets:
    /// it never removes a file between a store and the commit of its record.
    @Test func collectingWhileAnotherProcessStoresAndCommitsNeverRemovesAFileInUse() async throws {
        defer { directory.remove() }
        let mirror = try await openMirror()
        let worker = try await Worker(directory)
        try worker.process.send("loop 20 200000")
        var collections = 0
        while collections < 100_000, !worker.lines.items.contains(where: { $0 == "committed l19" || $0.hasPrefix("error ") }) {
            _ = try await mirror.removeUnreferencedAssets()
            collections += 1
        }
        #expect(!worker.lines.items.contains { $0.hasPrefix("error ") }, "\(worker.lines.items.filter { $0.hasPrefix("error ") })")
        try await waitUntil(mirror, "the other process's 20 records") { $0.count == 20 }
        #expect(try await mirror.removeUnreferencedAssets() == 0)
        for record in mirror.dataModel {
            #expect(try await mirror.data(for: record.file) == AssetPayload.bytes(name: record.id, size: record.file.size))
        }
        try await worker.quit()
    }

    /// The worker kills itself at a chosen call while it stores a 3 MiB asset (copied in
    /// 1 MiB pieces, after creating the `assets` directory and flushing its parent): in the
    /// middle of the copy, at the copy's flush, at the lease, at the rename, at the flush of
    /// the directory after the rename.
    @Test(arguments: ["write:2:1000", "fsync:2", "write:4", "rename:1", "fsync:3"])
    func killedWhileStoringAnAssetLeavesNoRecordAndNothingThatIsNotCollected(crashAt: String) async throws {
        defer { directory.remove() }
        let worker = try await Worker(directory, ["--crash-at", crashAt])
        try worker.process.send("store photo 3145728")
        try worker.process.send("commit photo")
        #expect(try await worker.process.waitForExit() == 128 + SIGKILL)
        #expect(!worker.lines.items.contains { $0.hasPrefix("committed") })

        let mirror = try await openMirror()
        #expect(mirror.dataModel.isEmpty)
        _ = try await mirror.removeUnreferencedAssets()
        #expect(assetFiles().isEmpty)
        #expect(leftovers().isEmpty)
    }

    /// A process stores and commits assets of various sizes in a loop and is killed with
    /// SIGKILL at a random moment, a few times over: every acknowledged record is there, and
    /// every record's asset is whole; a collection then removes only what no record refers to.
    @Test func killedAtRandomMomentsNoRecordEverPointsAtAMissingOrPartialFile() async throws {
        defer { directory.remove() }
        let seed = Reliability.seed
        var generator = SplitMix64(seed: seed)
        var acknowledged = Set<String>()
        for round in 0..<3 {
            let worker = try await Worker(directory)
            let goal = acknowledged.count + 1 + Int(generator.next() % 4)
            try worker.process.send("loop 40 1500000")
            let wanted = goal - acknowledged.count
            try await worker.lines.wait("round \(round): \(goal) records") { lines in
                lines.count { $0.hasPrefix("committed ") } >= wanted
                    || lines.contains { $0.hasPrefix("error ") }
            }
            // Somewhere in the next store or commit.
            try await Task.sleep(for: .milliseconds(Int(generator.next() % 40)))
            worker.process.kill()
            _ = try await worker.process.waitForExit()
            #expect(!worker.lines.items.contains { $0.hasPrefix("error ") })
            for line in worker.lines.items where line.hasPrefix("committed ") {
                acknowledged.insert(String(line.dropFirst("committed ".count)))
            }

            let mirror = try await openMirror()
            #expect(acknowledged.isSubset(of: Set(mirror.dataModel.map(\.id))), "seed \(seed)")
            _ = try await mirror.removeUnreferencedAssets()
            #expect(leftovers().isEmpty)
            #expect(Set(assetFiles()) == Set(mirror.dataModel.map(\.file.digest)))
            for record in mirror.dataModel {
                let bytes = try await mirror.data(for: record.file)
                #expect(bytes == AssetPayload.bytes(name: record.id, size: record.file.size), "\(record.id), seed \(seed)")
            }
        }
    }
}
