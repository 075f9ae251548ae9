import Foundation
@testable import MagicMirrorPostgreSQL
import MagicMirror
import MirrorTesting
import PostgresNIO
import Testing

/// A private mirror with a cipher over PostgreSQL (`InsecureTestCipher`; the adapter does not
/// depend on a cryptography library): the server stores ciphertext only, and another mirror
/// with the key reads the values.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestServer.isAvailable, TestServer.skipMessage))
struct PostgreSQLSealedRecordTests {
    struct Note: Recordable, Hashable {
        var id: String
        var title: String
        var body = ""
    }

    @Test func theServerHoldsCiphertextAndAnotherMirrorWithTheKeyReadsTheValues() async throws {
        try await TestServer.withDatabase { name, opened in
            let cipher = InsecureTestCipher(keyID: "k1", secret: "ann's secret")
            let configuration = MirrorConfiguration(retryDelay: .milliseconds(20), cipher: cipher)
            let ann = try MirrorUser(name: "ann")
            let database = try await opened.open(TestServer.url(database: name))
            let writer = try await Mirror<Note>(database: database, scope: .private, user: ann, configuration: configuration)
            writer.dataModel.append(Note(id: "n1", title: "Zanzibar-title-0451", body: "pineapple-body-7713"))
            try await writer.flush()

            let stored = try await TestServer.withAdmin(database: name) { client in
                var rows: [String] = []
                for try await text in try await client.query(
                    "SELECT convert_from(fields, 'UTF8') FROM magicmirror.records WHERE owner = 'ann' AND id = 'n1'",
                    logger: TestServer.logger
                ).decode(String.self) { rows.append(text) }
                return rows
            }
            #expect(stored.count == 1)
            for row in stored {
                #expect(row.hasPrefix(#"{"$key":"k1","$sealed":"#), "\(row)")
                for plaintext in ["Zanzibar", "pineapple", "\"title\"", "\"body\""] {
                    #expect(!row.contains(plaintext), "the server holds \(plaintext): \(row)")
                }
            }

            let other = try await opened.open(TestServer.url(database: name))
            let reader = try await Mirror<Note>(database: other, scope: .private, user: ann, configuration: configuration)
            #expect(reader.dataModel.array == [Note(id: "n1", title: "Zanzibar-title-0451", body: "pineapple-body-7713")])
            // An edit through the reader opens in the writer.
            reader.dataModel[0].body = "mango-body-2208"
            try await reader.flush()
            try await writer.waitUntil(timeout: .seconds(60)) { $0.first?.body == "mango-body-2208" }
        }
    }
}
