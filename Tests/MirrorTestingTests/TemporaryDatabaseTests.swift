import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct TemporaryDatabaseTests {
    private struct Boom: Error {}

    private func exists(_ url: URL) -> Bool {
        FileManager.default.fileExists(atPath: url.path)
    }

    /// The paths of the files below `directory`, relative to it.
    private func files(in directory: URL) -> [String] {
        let root = directory.resolvingSymlinksInPath().path
        let enumerator = FileManager.default.enumerator(atPath: root)
        var found: [String] = []
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                found.append(path)
            }
        }
        return found.sorted()
    }

    @Test func makesAFreshDirectoryInTheTemporaryDirectoryAndRemovesIt() async throws {
        let temporary = try TemporaryDatabase(name: "fresh directory/test")
        let another = try TemporaryDatabase(name: "fresh directory/test")
        #expect(temporary.directory != another.directory)
        #expect(temporary.directory.lastPathComponent.hasPrefix("MirrorTesting-freshdirectorytest-"))
        let systemTemporary = FileManager.default.temporaryDirectory.resolvingSymlinksInPath().path
        #expect(temporary.directory.path.hasPrefix(systemTemporary), "\(temporary.directory.path)")
        #expect(exists(temporary.directory))
        #expect(temporary.database.directory == temporary.directory)
        try await temporary.commit([newRecord("a")], to: .public("Todo"))
        #expect(files(in: temporary.directory).contains { $0.hasPrefix("public/Todo/") })
        #expect(!temporary.isRemoved)
        try temporary.remove()
        #expect(temporary.isRemoved)
        #expect(!exists(temporary.directory))
        // Removing again does nothing.
        try temporary.remove()
        try another.remove()
        #expect(!exists(another.directory))
    }

    @Test func isRemovedWhenNothingUsesItAnyMore() async throws {
        var temporary: TemporaryDatabase? = try TemporaryDatabase()
        let directory = try #require(temporary?.directory)
        try await temporary?.commit([newRecord("a")], to: .public("Todo"))
        #expect(exists(directory))
        temporary = nil
        #expect(!exists(directory))
    }

    @Test func commitsAreRelaxedUnlessToldOtherwise() throws {
        let relaxed = try TemporaryDatabase()
        defer { try? relaxed.remove() }
        #expect(relaxed.database.options.durability == .relaxed)
        #expect(TemporaryDatabase.defaultOptions.durability == .relaxed)
        let durable = try TemporaryDatabase(options: JSONFileDatabase.Options(durability: .durable))
        defer { try? durable.remove() }
        #expect(durable.database.options.durability == .durable)
    }

    @Test func forwardsEveryCallToItsJSONFileDatabase() async throws {
        let temporary = try TemporaryDatabase()
        defer { try? temporary.remove() }
        let zone = ZoneID.public("Todo")
        #expect(temporary.identifier == temporary.database.identifier)
        #expect(temporary.writerID == temporary.database.writerID)
        let heard = NotificationLog()
        let subscription = try temporary.subscribe(to: zone, handler: heard.handler)
        defer { subscription.cancel() }
        let outcome = try await temporary.commit([newRecord("a"), newRecord("b")], to: zone)
        #expect(outcome.isApplied)
        #expect(try await temporary.database.fetchAll(in: zone).records.count == 2)
        #expect(Set(try await temporary.fetchAll(in: zone).records.map(\.id)) == ["a", "b"])
        #expect(try await temporary.fetch(["b"], in: zone).map(\.id) == ["b"])
        #expect(try await temporary.currentToken(in: zone) == outcome.token)
        #expect(try await temporary.changes(in: zone, since: .initial).records.count == 2)
        #expect(heard.all.flatMap(\.recordIDs).sorted() == ["a", "b"])
    }

    @Test func aMirrorOnATemporaryDatabaseWritesRealFiles() async throws {
        try await withTemporaryDatabase { database in
            let mirror = try await sampleMirror(on: database)
            let record = SampleRecord(title: "On disk")
            mirror.dataModel.append(record)
            try await mirror.flush()
            let journals = files(in: database.directory).filter {
                $0.hasPrefix("public/SampleRecord/") && $0.hasSuffix(".ndjson")
            }
            #expect(!journals.isEmpty)
            let text = try journals.map {
                try String(contentsOf: database.directory.appendingPathComponent($0), encoding: .utf8)
            }.joined()
            #expect(text.contains(record.recordID))
            #expect(text.contains("On disk"))
            // A second mirror reads what the first stored.
            let reader = try await sampleMirror(on: database)
            #expect(reader.dataModel.array == [record])
        }
    }

    @Test func withTemporaryDatabaseRemovesTheDirectoryWhenTheBodyReturnsOrThrows() async throws {
        let kept = try await withTemporaryDatabase { database in
            #expect(exists(database.directory))
            return database.directory
        }
        #expect(!exists(kept))
        var thrownFrom: URL?
        do {
            try await withTemporaryDatabase { database in
                thrownFrom = database.directory
                throw Boom()
            }
            Issue.record("the error was not rethrown")
        } catch is Boom {}
        let directory = try #require(thrownFrom)
        #expect(!exists(directory))
    }

    @Test @MainActor func withTemporaryDatabaseRunsTheBodyOnTheCallersActor() async throws {
        var count = 0
        try await withTemporaryDatabase { database in
            MainActor.assertIsolated()
            count += 1
            try await database.commit([newRecord("a")], to: .public("Todo"))
            count += 1
        }
        #expect(count == 2)
    }
}
