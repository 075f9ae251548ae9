import Crypto
import Foundation
import MagicMirror
import MagicMirrorEncryption
import MirrorTesting
import Testing

// The AES-GCM code of the "Encrypting private records" article (Sources/MagicMirror/
// Documentation.docc/EncryptingPrivateRecords.md in the root package), compiled and run. Its
// blocks appear here exactly as in the article, which is why they are not indented; the root
// package's Tests/MirrorTestingTests/EncryptingPrivateRecordsArticleTests.swift checks that
// every block of the article is here or in the root package's tests.

enum EncryptingPrivateRecordsArticle {
struct Note: Recordable {
    var id = UUID()
    var title: String
}
}

@Suite(.timeLimit(.minutes(5))) struct EncryptingPrivateRecordsArticleTests {
    typealias Note = EncryptingPrivateRecordsArticle.Note

    @Test func theArticlesExamplesRun() async throws {
        let temporary = try TemporaryDatabase(name: "article")
        defer { try? temporary.remove() }
        let database = temporary.database
        let keyBytes = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let newKeyBytes = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }

let cipher = try AESGCMRecordCipher(keyID: "2026-11", keyBytes: keyBytes)
let notes = try await Mirror<Note>(
    database: database, scope: .private, user: try MirrorUser(name: "ann"),
    configuration: MirrorConfiguration(cipher: cipher))
notes.dataModel.append(Note(title: "Call the bank"))
try await notes.flush()

        let zone = ZoneID.private("Note", user: "ann")
        let sealed = try #require(try await database.fetchAll(in: zone).records.first?.fields)
        #expect(sealed.range(of: Data("Call the bank".utf8)) == nil)
        #expect(String(decoding: sealed, as: UTF8.self).hasPrefix(#"{"$key":"2026-11","$sealed":"#))

let rotated = try AESGCMRecordCipher(
    keyID: "2027-01", keyBytes: newKeyBytes, olderKeys: ["2026-11": keyBytes])
let current = try await Mirror<Note>(
    database: database, scope: .private, user: try MirrorUser(name: "ann"),
    configuration: MirrorConfiguration(cipher: rotated))
try await current.migrateStoredRecords()   // every record sealed with "2027-01"

        #expect(current.dataModel.map(\.title) == ["Call the bank"])
        let resealed = try #require(try await database.fetchAll(in: zone).records.first?.fields)
        #expect(String(decoding: resealed, as: UTF8.self).hasPrefix(#"{"$key":"2027-01","$sealed":"#))
        _ = notes
    }
}
