import Foundation
import Logging
import MagicMirror
@testable import MagicMirrorPostgreSQL
import MirrorTestSupport
import PostgresNIO
import Testing

/// Assets through `Mirror` in real processes (`pg-mirror-worker --photos`): stored by one,
/// read by another, kept while a live writer holds them, collected once it died; hostile
/// asset values and bytes changed on the server.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLAssetProcessTests {
    /// A file of `size` bytes of a pattern that differs for every `seed` and every MiB,
    /// written a MiB at a time; removed by the caller.
    private func makeFile(size: Int, seed: UInt8) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("asset-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var block = [UInt8](repeating: 0, count: 1 << 20)
        for index in block.indices { block[index] = UInt8(truncatingIfNeeded: index &* 31 &+ Int(seed)) }
        var written = 0
        var number: UInt64 = 0
        while written < size {
            // Each MiB starts with its number, so no two are alike.
            withUnsafeBytes(of: number.littleEndian) { block.replaceSubrange(0..<8, with: $0) }
            let count = min(block.count, size - written)
            try handle.write(contentsOf: Data(block[0..<count]))
            written += count
            number += 1
        }
        return url
    }

    /// Runs `body` with a fresh database, `count` ready photo workers on it, and a path for
    /// a copy; afterwards kills the workers and removes the copy and `files`.
    private func withPhotoWorkers(
        _ count: Int, removing files: [URL],
        _ body: (_ workers: [PhotoProcess], _ copy: URL, _ database: String) async throws -> Void
    ) async throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("copy-\(UUID().uuidString)")
        defer { for file in files + [copy] { try? FileManager.default.removeItem(at: file) } }
        try await TestServer.withDatabase { name, opened in
            let url = TestServer.url(database: name)
            _ = try await opened.open(url) // the schema, before the workers race to make it
            var workers: [PhotoProcess] = []
            defer { for worker in workers { worker.process.kill() } }
            for _ in 0..<count {
                workers.append(PhotoProcess(process: try Subprocess(
                    PackageExecutable.url("pg-mirror-worker"), ["--photos", url], standardInput: true)))
            }
            for worker in workers { try await worker.ready() }
            try await body(workers, copy, name)
        }
    }

    @Test func anAssetStoredByOneProcessIsReadByAnotherAndCollectedOnlyOnceItsWriterIsGone() async throws {
        let first = try makeFile(size: 3 * (1 << 20) + 17, seed: 1)
        let second = try makeFile(size: 1000, seed: 2)
        try await withPhotoWorkers(2, removing: [first, second]) { workers, copy, _ in
            let (writer, reader) = (workers[0], workers[1])
            let asset = try await writer.send("store \(first.path)").dropFirst(3)
            try await writer.send("append harbour \(asset)")
            try await writer.send("committed")
            let read = try await reader.send("read harbour \(copy.path)")
            #expect(read == "ok \(3 * (1 << 20) + 17)")
            #expect(try Data(contentsOf: copy) == Data(contentsOf: first))
            let local = try await reader.send("file harbour").dropFirst(3)
            #expect(try Data(contentsOf: URL(fileURLWithPath: String(local))) == Data(contentsOf: first))

            // Stored, no record refers to it yet: kept while its writer lives.
            _ = try await writer.send("store \(second.path)")
            #expect(try await reader.send("collect") == "ok 0")
            writer.process.kill()
            _ = try await writer.process.wait()
            // The server drops the dead writer's lock when it sees its connection close.
            let deadline = ContinuousClock.now + .seconds(60)
            var collected = try await reader.send("collect")
            while collected == "ok 0", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                collected = try await reader.send("collect")
            }
            #expect(collected == "ok 1")
            #expect(try await reader.send("read harbour \(copy.path)") == read)
        }
    }

    @Test func hostileAssetValuesAndChangedBytesAreReportedAndLoseNothingElse() async throws {
        let file = try makeFile(size: 5000, seed: 3)
        try await withPhotoWorkers(1, removing: [file]) { workers, copy, name in
            let worker = workers[0]
            let asset = try await worker.send("store \(file.path)").dropFirst(3)
            try await worker.send("append good \(asset)")
            try await worker.send("committed")

            // A record that names an asset never stored: refused, held, reported.
            let ghost = #"{"$asset":"\#(String(repeating: "0", count: 64))","size":3}"#
            try await worker.send("append ghost \(ghost)")
            #expect(try await worker.send("failing") == "ok notFound")

            // A writer with SQL access plants a record whose asset is a path, and changes
            // the stored bytes of the good asset.
            _ = try await TestServer.withAdmin(database: name) { client in
                try await TestServer.plant(
                    "evil", fields: #"{"id":"evil","image":{"$asset":"../../../etc/passwd","size":1}}"#,
                    recordType: "Photo", with: client)
                try await client.query(
                    "SELECT pg_notify('magicmirror', magicmirror.notification(notify_key, last_seq)) FROM magicmirror.zones",
                    logger: TestServer.logger)
                try await client.query(
                    "UPDATE magicmirror.asset_chunks SET data = overlay(data PLACING '\\x00'::bytea FROM 10)",
                    logger: TestServer.logger)
            }
            let reported = try await worker.send("lasterror decodingFailed")
            #expect(reported.contains("evil"), "\(reported)")
            #expect(try await worker.send("ids") == "ok ghost,good")
            let changed = try await worker.send("read good \(copy.path)", expectingError: true)
            #expect(changed.contains("corruptEntry"), "\(changed)")
            // Nothing under /etc was read or written: the value never became a path.
            #expect(!FileManager.default.fileExists(atPath: copy.path + "/etc"))
        }
    }

    /// A 256 MiB asset stored by one process and read by another: neither holds it in
    /// memory (their peak resident memory stays far below its size).
    @Test func aLargeAssetIsStreamedBothWays() async throws {
        let size = 256 << 20
        let file = try makeFile(size: size, seed: 4)
        try await withPhotoWorkers(2, removing: [file]) { workers, copy, _ in
            let (writer, reader) = (workers[0], workers[1])
            let asset = try await writer.send("store \(file.path)").dropFirst(3)
            try await writer.send("append big \(asset)")
            try await writer.send("committed")
            #expect(try await reader.send("read big \(copy.path)") == "ok \(size)")
            let attributes = try FileManager.default.attributesOfItem(atPath: copy.path)
            #expect((attributes[.size] as? NSNumber)?.intValue == size)
            for worker in [writer, reader] {
                let peak = Int(try await worker.send("memory").dropFirst(3)) ?? .max
                #expect(peak < 160, "peak resident memory \(peak) MiB for a \(size >> 20) MiB asset")
            }
        }
    }
}

/// A `pg-mirror-worker --photos`, driven line by line.
struct PhotoProcess: Sendable {
    let process: Subprocess

    func ready() async throws {
        let line = try await process.nextLine(timeout: .seconds(120))
        guard line.hasPrefix("ok") else { throw SubprocessError("photos worker: \(line) \(process.standardError)") }
    }

    /// Sends a command and returns its answer; throws unless it is `ok …` (or, when
    /// `expectingError`, `error …`).
    @discardableResult
    func send(_ command: String, expectingError: Bool = false) async throws -> String {
        process.write(command + "\n")
        let answer = try await process.nextLine(timeout: .seconds(300))
        guard answer.hasPrefix(expectingError ? "error" : "ok") else {
            throw SubprocessError("photos worker: \(command.prefix(200)): \(answer); standard error: \(process.standardError)")
        }
        return answer
    }
}
