import Foundation
import Logging
import MagicMirror
@testable import MagicMirrorPostgreSQL
import MirrorTestSupport
import MirrorTesting
import PostgresNIO
import Testing

/// Delete rules on the server, through `Mirror`: cascade (recursively, seen by another
/// database's mirrors), nullify of to-one and to-many fields, deny, a process that never
/// opened the referring types, writers racing the delete, a client killed in the middle of
/// a cascade, private rules, and fields that are not references.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLRelationshipTests {
    private static let timeout = Duration.seconds(60)

    @Test func deletingAnAuthorCascadesToBooksAndChaptersSeenByAnotherDatabase() async throws {
        try await TestServer.withDatabase { name, opened in
            let library = try await LinkLibrary(try await opened.open(TestServer.url(database: name)))
            try await library.seed()
            // Another database (its own connections and writer id) hears the cascade.
            let elsewhere = try await opened.open(TestServer.url(database: name))
            let otherBooks = try await Mirror<LinkBook>(database: elsewhere)
            let otherChapters = try await Mirror<LinkChapter>(database: elsewhere)
            _ = try await otherChapters.waitUntil(timeout: Self.timeout) { $0.count == 3 }

            library.authors.dataModel.remove(recordID: "ann")
            try await library.authors.flush()

            _ = try await library.books.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["b3"] }
            _ = try await library.chapters.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["c3"] }
            _ = try await otherBooks.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["b3"] }
            _ = try await otherChapters.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["c3"] }
            #expect(try await elsewhere.fetchAll(in: .public("LinkBook")).records.map(\.id) == ["b3"])
        }
    }

    @Test func deletingAnEditorOrReviewerNullifiesToOneAndToManyReferences() async throws {
        try await TestServer.withDatabase { name, opened in
            let library = try await LinkLibrary(try await opened.open(TestServer.url(database: name)))
            let ann = LinkAuthor(id: "ann", name: "Ann")
            let eve = LinkAuthor(id: "eve", name: "Eve")
            let kim = LinkAuthor(id: "kim", name: "Kim")
            library.authors.dataModel.append(contentsOf: [ann, eve, kim])
            library.books.dataModel.append(
                LinkBook(id: "b1", title: "one", author: Reference(to: ann), editor: Reference(to: eve),
                         reviewers: [Reference(to: eve), Reference(to: kim)]))
            try await library.flush()

            library.authors.dataModel.remove(recordID: "eve")
            try await library.authors.flush()

            _ = try await library.books.waitUntil(timeout: Self.timeout, "eve to leave b1") { books in
                books.first?.editor == nil && books.first?.reviewers == [Reference(to: kim)]
            }
            let book = try #require(library.books.dataModel.first)
            #expect(book.author == Reference(to: ann))
            #expect(book.title == "one")
        }
    }

    @Test func aDeniedDeleteIsRefusedAndNothingIsStored() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let library = try await LinkLibrary(database)
            try await library.seed()
            library.awards.dataModel.append(LinkAward(id: "prize", winner: Reference(recordID: "ann")))
            try await library.flush()
            let before = try await lastSequences(database: name)

            library.authors.dataModel.remove(recordID: "ann")
            var failure: MirrorError?
            do {
                try await library.authors.flush()
            } catch let error as MirrorError {
                failure = error
            }
            #expect(failure?.kind == .refused)
            #expect(failure?.recordIDs == ["ann"])
            #expect(failure?.nothingStored == true)
            #expect(failure?.message.contains("prize") == true, "\(String(describing: failure))")
            #expect(library.authors.dataModel.map(\.id).sorted() == ["ann", "bob"], "the refused removal is undone")
            #expect(try await database.fetchAll(in: .public("LinkBook")).records.count == 3)
            #expect(try await lastSequences(database: name) == before, "no zone moved")

            // Once the award is gone, the same delete goes through with its cascade.
            library.awards.dataModel.removeAll()
            try await library.awards.flush()
            library.authors.dataModel.remove(recordID: "ann")
            try await library.authors.flush()
            _ = try await library.books.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["b3"] }
        }
    }

    /// A process that knows only authors deletes one: the rules stored by this process's
    /// mirrors apply there too (cascade); and a deny rule refuses it there.
    @Test func aProcessThatNeverOpenedTheReferringTypesEnforcesTheirRules() async throws {
        try await TestServer.withDatabase { name, opened in
            let library = try await LinkLibrary(try await opened.open(TestServer.url(database: name)))
            try await library.seed()
            library.awards.dataModel.append(LinkAward(id: "prize", winner: Reference(recordID: "bob")))
            try await library.flush()

            let deleted = try await PackageExecutable.run(
                "pg-mirror-worker", ["--delete-author", TestServer.url(database: name), "ann"])
            #expect(deleted.status == 0 && deleted.stdout == "ok", "\(deleted)")
            _ = try await library.authors.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["bob"] }
            _ = try await library.books.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["b3"] }
            _ = try await library.chapters.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["c3"] }

            let denied = try await PackageExecutable.run(
                "pg-mirror-worker", ["--delete-author", TestServer.url(database: name), "bob"])
            #expect(denied.status == 0 && denied.stdout == "refused bob", "\(denied)")
            #expect(library.authors.dataModel.map(\.id) == ["bob"])
            #expect(library.books.dataModel.map(\.id) == ["b3"])
        }
    }

    /// Another writer re-points a book at another author, and adds a book by the author,
    /// while the delete waits for the books' zone: the delete must read the books after it
    /// holds the zone, keep the re-pointed book and delete the new one.
    @Test func referencesChangedOrAddedWhileTheDeleteWaitsAreSeen() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let library = try await LinkLibrary(database)
            try await library.seed()
            let delete = try await TestServer.whileHoldingZone(
                "LinkBook", database: name,
                [
                    // Another writer's commits, as the server would store them: b1 now by
                    // bob, and a new book b4 by ann.
                    """
                    WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                         moved AS (UPDATE magicmirror.zones SET last_seq = (SELECT seq FROM drawn)
                                   WHERE record_type = 'LinkBook')
                    UPDATE magicmirror.records SET version = version + 1, writer = 'other',
                           fields = convert_to(replace(convert_from(fields, 'UTF8'), '"ann"', '"bob"'), 'UTF8'),
                           seq = (SELECT seq FROM drawn)
                    WHERE id = 'b1'
                    """,
                    """
                    WITH drawn AS (SELECT nextval('magicmirror.change_seq') AS seq),
                         moved AS (UPDATE magicmirror.zones SET last_seq = (SELECT seq FROM drawn)
                                   WHERE record_type = 'LinkBook' RETURNING zone_id)
                    INSERT INTO magicmirror.records
                        (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer,
                         seq, created_millis, created_counter)
                    SELECT zone_id, 'public', '', 'b4', 1,
                           convert_to('{"id":"b4","title":"four","reviewers":[],"author":{"recordType":"LinkAuthor","recordID":"ann"}}', 'UTF8'),
                           1, 0, 'other', (SELECT seq FROM drawn), 1, 0
                    FROM moved
                    """,
                ]
            ) {
                try await database.commit(
                    [.delete("ann", baseVersion: 1, timestamp: .testNow())], to: .public("LinkAuthor"))
            }
            #expect(try await delete.value.isApplied)
            let books = try await database.fetchAll(in: .public("LinkBook")).records.map(\.id).sorted()
            #expect(books == ["b1", "b3"], "b2 and b4 cascaded, b1 (re-pointed at bob) kept")
            let chapters = try await database.fetchAll(in: .public("LinkChapter")).records.map(\.id).sorted()
            #expect(chapters == ["c1", "c3"])
        }
    }

    /// An editor of a book commits while a cascade that deletes the book is in its
    /// transaction: the editor waits for the books' zone, then finds the book deleted and
    /// conflicts (a delete wins over a concurrent edit); the cascade is whole.
    @Test func anEditOfAReferrerDuringTheCascadeConflictsWithTheDelete() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let library = try await LinkLibrary(database)
            try await library.seed()
            let editor = try await opened.open(TestServer.url(database: name))
            let b1 = try #require(try await editor.fetch(["b1"], in: .public("LinkBook")).first)
            typealias Commits = (delete: Task<CommitOutcome, any Error>, edit: Task<CommitOutcome, any Error>)
            try await whileBlockingTheWriteOf("c1", database: name) { () async throws -> Commits in
                let delete = Task {
                    try await database.commit(
                        [.delete("ann", baseVersion: 1, timestamp: .testNow())], to: .public("LinkAuthor"))
                }
                try await TestServer.waitForLockWaits(database: name, count: 1)
                let edit = Task {
                    try await editor.commit(
                        [.save("b1", fields: Data(#"{"title":"edited"}"#.utf8), baseVersion: b1.version,
                               timestamp: .testNow())],
                        to: .public("LinkBook"))
                }
                try await TestServer.waitForLockWaits(database: name, count: 2)
                return (delete, edit)
            } after: { (commits: Commits) in
                #expect(try await commits.delete.value.isApplied)
                let outcome = try await commits.edit.value
                #expect(!outcome.isApplied, "the edit of a book the cascade deleted conflicts")
            }
            #expect(try await database.fetchAll(in: .public("LinkBook")).records.map(\.id) == ["b3"])
            #expect(try await database.fetchAll(in: .public("LinkChapter")).records.map(\.id) == ["c3"])
        }
    }

    /// The deleting process is killed with SIGKILL in the middle of its cascade, after the
    /// author's and the books' changes were written in its transaction and while the
    /// chapters' wait: the server rolls it all back. Then the delete goes through whole.
    @Test func aClientKilledInTheMiddleOfACascadeLeavesNothing() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let library = try await LinkLibrary(database)
            try await library.seed()
            let before = try await lastSequences(database: name)

            try await whileBlockingTheWriteOf("c1", database: name) { () async throws in
                let worker = try PackageExecutable.start(
                    "pg-mirror-worker", ["--delete-author", TestServer.url(database: name), "ann"])
                try await TestServer.waitForLockWaits(database: name, count: 1)
                // Its transaction wrote the author's and the books' changes already.
                #expect(try await uncommittedRecordWrites(database: name) > 0)
                worker.kill()
                _ = try await worker.wait()
            } after: { (_: Void) in }
            try await waitForNoOtherActivity(database: name)

            #expect(try await lastSequences(database: name) == before, "no zone moved")
            #expect(try await database.fetchAll(in: .public("LinkAuthor")).records.map(\.id).sorted() == ["ann", "bob"])
            #expect(try await database.fetchAll(in: .public("LinkBook")).records.count == 3)
            #expect(try await database.fetchAll(in: .public("LinkChapter")).records.count == 3)

            library.authors.dataModel.remove(recordID: "ann")
            try await library.authors.flush()
            _ = try await library.chapters.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["c3"] }
        }
    }

    /// A user's private rules and records: another role sees neither, cannot store rules in
    /// that space, and its own deletes follow only its own rules.
    @Test func privateRulesAreTheirUsersAlone() async throws {
        try await TestServer.withDatabase { name, opened in
            _ = try await opened.open(TestServer.url(database: name)) // the schema's owner
            try await TestServer.withRoles(["alice", "bob"]) { roles in
                let (alice, bob) = (roles[0], roles[1])
                let asAlice = try await opened.open(TestServer.url(database: name, role: alice))
                let asBob = try await opened.open(TestServer.url(database: name, role: bob))
                let user = try MirrorUser(name: alice)
                let authors = try await Mirror<LinkAuthor>(database: asAlice, scope: .private, user: user)
                let books = try await Mirror<LinkBook>(database: asAlice, scope: .private, user: user)
                authors.dataModel.append(LinkAuthor(id: "ann", name: "Ann"))
                books.dataModel.append(LinkBook(id: "b1", title: "one", author: Reference(recordID: "ann")))
                try await authors.flush()
                try await books.flush()

                // Bob sees no rule of alice's, and cannot store one in her space.
                let rulesQuery: PostgresQuery = "SELECT count(*)::int8 FROM magicmirror.delete_rules"
                let seen = try await TestServer.withClient(database: name, role: bob) {
                    try await TestServer.count(rulesQuery, with: $0)
                }
                #expect(seen == 0)
                let mine = try await TestServer.withClient(database: name, role: alice) {
                    try await TestServer.count(rulesQuery, with: $0)
                }
                #expect(mine == 3)
                do {
                    try await asBob.registerDeleteRules(
                        LinkBook.deleteRules.map(\.stored), referringType: "LinkBook",
                        in: .private("LinkBook", user: alice))
                    Issue.record("bob stored rules in alice's private space")
                } catch let error as MirrorError {
                    #expect(error.kind == .permissionDenied)
                }
                // Bob's own private author and book: no rule of his, so the book stays.
                try await asBob.commit(
                    [.save("ann", fields: try JSONEncoder().encode(LinkAuthor(id: "ann", name: "B")),
                           baseVersion: 0, timestamp: .testNow())],
                    to: .private("LinkAuthor", user: bob))
                try await asBob.commit(
                    [.save("b1", fields: try JSONEncoder().encode(
                        LinkBook(id: "b1", title: "bob's", author: Reference(recordID: "ann"))),
                           baseVersion: 0, timestamp: .testNow())],
                    to: .private("LinkBook", user: bob))
                try await asBob.commit(
                    [.delete("ann", baseVersion: 1, timestamp: .testNow())], to: .private("LinkAuthor", user: bob))
                #expect(try await asBob.fetchAll(in: .private("LinkBook", user: bob)).records.map(\.id) == ["b1"])

                // Alice's delete cascades in her space.
                authors.dataModel.remove(recordID: "ann")
                try await authors.flush()
                _ = try await books.waitUntil(timeout: Self.timeout) { $0.isEmpty }
                #expect(try await asBob.fetchAll(in: .private("LinkBook", user: bob)).records.map(\.id) == ["b1"])
            }
        }
    }

    /// Fields another program wrote that are not references (another shape, another
    /// record type, an array of junk, bytes that are not JSON) are neither followed nor
    /// changed, and do not make the delete fail.
    @Test func fieldsThatAreNotReferencesAreNeitherFollowedNorChanged() async throws {
        try await TestServer.withDatabase { name, opened in
            let database = try await opened.open(TestServer.url(database: name))
            let library = try await LinkLibrary(database)
            try await library.seed()
            let hostile: [(String, String)] = [
                ("h-string", #"{"id":"h-string","title":"x","author":"ann","reviewers":[]}"#),
                ("h-type", #"{"id":"h-type","title":"x","author":{"recordType":"LinkAward","recordID":"ann"}}"#),
                ("h-array", #"{"id":"h-array","title":"x","author":[1,"ann",{"recordID":"ann"}],"reviewers":{"a":1}}"#),
                ("h-badid", #"{"id":"h-badid","title":"x","author":{"recordType":"LinkAuthor","recordID":""}}"#),
            ]
            _ = try await TestServer.withAdmin(database: name) { client in
                for (id, fields) in hostile {
                    try await TestServer.plant(id, fields: fields, recordType: "LinkBook", with: client)
                }
                // Bytes that are not JSON (not even UTF-8).
                try await client.query(
                    """
                    UPDATE magicmirror.records SET fields = '\\xff00ff'::bytea WHERE id = 'h-badid'
                    """, logger: TestServer.logger)
            }
            let planted = try await storedFields(ids: hostile.map(\.0), database: name)

            library.authors.dataModel.remove(recordID: "ann")
            try await library.authors.flush()
            _ = try await library.chapters.waitUntil(timeout: Self.timeout) { $0.map(\.id) == ["c3"] }
            let books = try await database.fetchAll(in: .public("LinkBook")).records.map(\.id).sorted()
            #expect(books == ["b3", "h-array", "h-badid", "h-string", "h-type"])
            #expect(try await storedFields(ids: hostile.map(\.0), database: name) == planted, "left untouched")
        }
    }

    // MARK: - Helpers

    /// The last sequence of every zone, by record type and owner.
    private func lastSequences(database name: String) async throws -> [String: Int] {
        try await TestServer.withAdmin(database: name) { client in
            var found: [String: Int] = [:]
            for try await (type, owner, last) in try await client.query(
                "SELECT record_type, owner, last_seq FROM magicmirror.zones", logger: TestServer.logger
            ).decode((String, String, Int).self) {
                found["\(owner)/\(type)"] = last
            }
            return found
        }
    }

    /// The stored bytes of records `ids` (of any zone), by id.
    private func storedFields(ids: [String], database name: String) async throws -> [String: Data] {
        try await TestServer.withAdmin(database: name) { client in
            var found: [String: Data] = [:]
            for try await (id, fields) in try await client.query(
                "SELECT id, fields FROM magicmirror.records WHERE id = ANY(\(ids)::text[])", logger: TestServer.logger
            ).decode((String, Data).self) {
                found[id] = fields
            }
            return found
        }
    }

    /// How many rows of `magicmirror.records` transactions that have not ended changed:
    /// the row locks they hold, seen through `pg_locks` as the relation's write lock.
    private func uncommittedRecordWrites(database name: String) async throws -> Int {
        try await TestServer.count(
            """
            SELECT count(*)::int8 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE a.datname = current_database() AND l.relation = 'magicmirror.records'::regclass
              AND l.mode = 'RowExclusiveLock' AND l.granted
            """, database: name)
    }

    /// Waits until no session of the database but the asking one is in a transaction.
    private func waitForNoOtherActivity(database name: String) async throws {
        let deadline = ContinuousClock.now + Self.timeout
        while ContinuousClock.now < deadline {
            let busy = try await TestServer.count(
                """
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
                """, database: name)
            if busy == 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("another session stayed in a transaction")
    }

    /// Makes every write of record `id` wait (a trigger that takes a shared advisory lock
    /// this test holds) while `body` runs, then lets them go and runs `after` with what
    /// `body` returned.
    private func whileBlockingTheWriteOf<Value: Sendable>(
        _ id: String, database name: String, _ body: () async throws -> Value,
        after: (Value) async throws -> Void
    ) async throws {
        let lock = 4242
        try await TestServer.withAdmin(database: name) { client in
            try await client.query(
                PostgresQuery(unsafeSQL: """
                    CREATE FUNCTION public.test_block() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF NEW.id = '\(id)' THEN PERFORM pg_advisory_xact_lock_shared(\(lock)); END IF;
                        RETURN NEW;
                    END $$
                    """), logger: TestServer.logger)
            try await client.query(
                """
                CREATE TRIGGER test_block BEFORE INSERT OR UPDATE ON magicmirror.records
                FOR EACH ROW EXECUTE FUNCTION public.test_block()
                """, logger: TestServer.logger)
            let value = try await client.withConnection { connection in
                try await connection.query("SELECT pg_advisory_lock(\(lock))", logger: TestServer.logger)
                do {
                    let value = try await body()
                    try await connection.query("SELECT pg_advisory_unlock(\(lock))", logger: TestServer.logger)
                    return value
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(\(lock))", logger: TestServer.logger)
                    throw error
                }
            }
            try await after(value)
            try await client.query("DROP TRIGGER test_block ON magicmirror.records", logger: TestServer.logger)
        }
    }
}

extension LinkLibrary {
    /// Ann (books b1, b2; b1 has chapter c1, b2 has c2) and Bob (book b3, chapter c3).
    func seed() async throws {
        let ann = LinkAuthor(id: "ann", name: "Ann")
        let bob = LinkAuthor(id: "bob", name: "Bob")
        authors.dataModel.append(contentsOf: [ann, bob])
        books.dataModel.append(contentsOf: [
            LinkBook(id: "b1", title: "one", author: Reference(to: ann)),
            LinkBook(id: "b2", title: "two", author: Reference(to: ann)),
            LinkBook(id: "b3", title: "three", author: Reference(to: bob)),
        ])
        chapters.dataModel.append(contentsOf: [
            LinkChapter(id: "c1", book: Reference(recordID: "b1")),
            LinkChapter(id: "c2", book: Reference(recordID: "b2")),
            LinkChapter(id: "c3", book: Reference(recordID: "b3")),
        ])
        try await flush()
    }
}
