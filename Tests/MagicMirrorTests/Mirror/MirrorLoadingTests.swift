import Foundation
@testable import MagicMirror
import Testing

private struct BadlyNamed: Recordable {
    static let recordType = "../escape"
    var id: String
}

/// Chore as an older or newer version of an app might store it: `rank` as a string.
private struct ChoreWithTextRank: Recordable {
    static let recordType = "Chore"
    var id: String
    var title: String
    var notes = ""
    var done = false
    var rank: String
}

@Suite(.timeLimit(.minutes(5))) struct MirrorLoadingTests {
    @Test(arguments: DatabaseFactory.all)
    func initLoadsEveryStoredRecord(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let chores = (0..<25).map { Chore(id: String(format: "c%02d", $0), title: "chore \($0)", rank: $0) }
        try await seed(chores, into: opened.database)

        let mirror = try await Mirror<Chore>(database: opened.database)

        // Loaded when init returns, ordered by record id.
        #expect(mirror.dataModel.array == chores)
        #expect(mirror.pendingChanges.isEmpty)
        #expect(mirror.zone == .public("Chore"))
    }

    @Test(arguments: DatabaseFactory.all)
    func privateScopeBelongsToTheCurrentUserByDefault(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let mine = try await Mirror<Chore>(database: opened.database, scope: .private)
        let user = try #require(CurrentUser.accountName())
        #expect(mine.zone == .private("Chore", user: user))

        let theirs = try await Mirror<Chore>(database: opened.database, scope: .private, user: try MirrorUser(name: "someone-else"))
        #expect(theirs.zone == .private("Chore", user: "someone-else"))
        mine.dataModel.append(Chore(title: "mine"))
        try await mine.flush()
        #expect(try await opened.database.fetchAll(in: mine.zone).records.count == 1)
        #expect(try await opened.database.fetchAll(in: theirs.zone).records.isEmpty)
        #expect(try await opened.database.fetchAll(in: .public("Chore")).records.isEmpty)
    }

    @Test(arguments: DatabaseFactory.all)
    func invalidNamesAreRefused(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        await #expect(throws: MirrorError.self) {
            _ = try await Mirror<BadlyNamed>(database: opened.database)
        }
        do {
            _ = try await Mirror<Chore>(database: opened.database, scope: .private, user: try MirrorUser(name: "a/b"))
            Issue.record("a user name with a slash was accepted")
        } catch let error as MirrorError {
            #expect(error.kind == .invalidName)
        }
    }

    @Test(arguments: DatabaseFactory.all)
    func aUserGivenWithThePublicScopeIsRefusedAndNothingIsOpened(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let alice = try MirrorUser(name: "alice")
        do {
            _ = try await Mirror<Chore>(database: opened.database, scope: .public, user: alice)
            Issue.record("a public mirror was opened for a user")
        } catch let error as MirrorError {
            #expect(error.kind == .invalidName)
            #expect(error.message.contains("public scope has no owner"), "a clear message: \(error.message)")
            #expect(error.scope == .public)
        }
        #expect(ZoneSubscriptions.counts(identifier: opened.database.identifier, zone: .public("Chore")).subscriptions == 0)
    }

    @Test func aDecodedZoneIsCheckedLikeAMadeOne() throws {
        let decoder = JSONDecoder()
        let good = try decoder.decode(ZoneID.self, from: Data(#"{"scope":"private","recordType":"Todo","user":"alice"}"#.utf8))
        #expect(good == .private("Todo", user: "alice"))
        for bad in [
            #"{"scope":"public","recordType":"Todo","user":"alice"}"#,
            #"{"scope":"private","recordType":"Todo"}"#,
            #"{"scope":"public","recordType":"../Todo"}"#,
            #"{"scope":"private","recordType":"Todo","user":"a/b"}"#,
        ] {
            #expect(throws: DecodingError.self, "\(bad)") { try decoder.decode(ZoneID.self, from: Data(bad.utf8)) }
        }
    }

    @Test(arguments: DatabaseFactory.all)
    func recordThatNoLongerDecodesIsReportedOnceSkippedAndUntouched(factory: DatabaseFactory) async throws {
        let opened = try await factory.make()
        defer { opened.cleanup() }
        let good = [Chore(title: "one"), Chore(title: "two")]
        let bad = ChoreWithTextRank(id: UUID().uuidString, title: "old", rank: "high")
        try await seed(good, into: opened.database)
        try await seed([bad], into: opened.database)
        let storedBad = try #require(try await opened.database.fetch([bad.id], in: .public("Chore")).first)
        let reported = ErrorNotificationCollector(naming: [bad.id])

        let mirror = try await Mirror<Chore>(database: opened.database)

        #expect(Set(mirror.dataModel.map(\.id)) == Set(good.map(\.id)))
        #expect(reported.count == 1)
        let error = try #require(mirror.lastError)
        #expect(error.kind == .decodingFailed)
        #expect(error.recordIDs == [bad.id])
        #expect(error.recordType == "Chore")

        // Later pulls and commits do not report it again, and never touch it.
        let other = try await opened.otherWriter()
        try await seed([Chore(title: "three")], into: other)
        try await waitUntil(mirror, "the third chore") { $0.count == 3 }
        mirror.dataModel[0].done = true
        try await mirror.flush()
        #expect(reported.count == 1)
        #expect(try await opened.database.fetch([bad.id], in: .public("Chore")).first == storedBad)
    }
}
