import Foundation
import MagicMirror
import MirrorTesting
import Testing

// The code of the "Encrypting private records" article (Sources/MagicMirror/Documentation.docc/
// EncryptingPrivateRecords.md) that needs no cryptography library, compiled and run; the blocks
// with AES-GCM run in Adapters/Encryption's tests. Blocks appear here exactly as in the
// article, which is why they are not indented; Tests/MirrorTestingTests/
// EncryptingPrivateRecordsArticleTests.swift checks that every block of the article is here
// or there.

enum EncryptingPrivateRecordsArticle {
struct Note: Recordable {
    var id = UUID()
    var title: String
}
}

@Suite(.timeLimit(.minutes(5))) struct EncryptingPrivateRecordsArticleTests {
    typealias Note = EncryptingPrivateRecordsArticle.Note

    @Test func theTestingExampleRuns() async throws {
let cipher = InsecureTestCipher(keyID: "test", secret: "not a secret")
let mirror = try await Mirror<Note>(
    database: InMemoryDatabase(), scope: .private, user: try MirrorUser(name: "ann"),
    configuration: MirrorConfiguration(cipher: cipher))

        mirror.dataModel.append(Note(title: "Zanzibar"))
        try await mirror.flush()
        let stored = try #require(try await mirror.database.fetchAll(in: mirror.zone).records.first?.fields)
        #expect(stored.range(of: Data("Zanzibar".utf8)) == nil)
        #expect(String(decoding: stored, as: UTF8.self).hasPrefix(#"{"$key":"test","$sealed":"#))
    }
}
