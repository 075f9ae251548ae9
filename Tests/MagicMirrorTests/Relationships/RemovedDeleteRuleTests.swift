import Foundation
@testable import MagicMirror
import MirrorTesting
import Testing

/// Removing the last delete rule from a type removes it from the database the next time a
/// mirror of the type opens, as the Relationships article says (issue #36): the cascade no
/// longer runs, on the JSON-file database and on both test doubles. A type that never had
/// rules leaves no trace of rules on the database.
@Suite(.timeLimit(.minutes(5))) struct RemovedDeleteRuleTests {
    struct RuleFolder: Recordable {
        var id: String
    }

    /// Version 1 of a note: deleting its folder deletes it.
    struct RuleNoteV1: Recordable {
        static var recordType: String { "RuleNote" }
        var id: String
        var folder: Reference<RuleFolder>
        static let deleteRules: [DeleteRule<RuleNoteV1>] = [.cascade("folder", \.folder)]
    }

    /// Version 2: the rule is gone.
    struct RuleNote: Recordable {
        var id: String
        var folder: Reference<RuleFolder>
    }

    /// The rules each kind of database stores for the public scope space.
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case inMemory, temporary, jsonFile
        var testDescription: String { rawValue }
    }

    struct Opened {
        let database: any RecordDatabase
        let rules: () throws -> [StoredDeleteRule]
        let directory: URL?
        let cleanup: () -> Void
    }

    static func open(_ kind: Kind) throws -> Opened {
        let zone = ZoneID.public("RuleNote")
        switch kind {
        case .inMemory:
            let database = InMemoryDatabase()
            return Opened(database: database, rules: { database.deleteRules(in: zone) }, directory: nil, cleanup: {})
        case .temporary:
            let database = try TemporaryDatabase()
            return Opened(
                database: database, rules: { try database.database.deleteRules(in: zone) },
                directory: database.directory, cleanup: { try? database.remove() })
        case .jsonFile:
            let directory = try TemporaryDirectory("removed-rule")
            let database = try JSONFileDatabase(isolatedDirectory: directory.url)
            return Opened(
                database: database, rules: { try database.deleteRules(in: zone) },
                directory: directory.url, cleanup: { directory.remove() })
        }
    }

    @Test(arguments: Kind.allCases)
    func removingATypesLastRuleRemovesItFromTheDatabase(kind: Kind) async throws {
        let opened = try Self.open(kind)
        defer { opened.cleanup() }
        let folders = try await Mirror<RuleFolder>(database: opened.database)
        do {
            let notes = try await Mirror<RuleNoteV1>(database: opened.database)
            #expect(try opened.rules().map(\.referringType) == ["RuleNote"])
            folders.dataModel.append(contentsOf: [RuleFolder(id: "work"), RuleFolder(id: "home")])
            try await folders.flush()
            notes.dataModel.append(contentsOf: [
                RuleNoteV1(id: "n1", folder: Reference(recordID: "work")),
                RuleNoteV1(id: "n2", folder: Reference(recordID: "home")),
            ])
            try await notes.flush()
            // Version 1's rule holds: deleting a folder deletes its notes.
            folders.dataModel.remove(recordID: "home")
            try await folders.flush()
            #expect(try await opened.database.fetch(["n2"], in: .public("RuleNote")).isEmpty, "cascaded")
        }

        // Version 2 of the app opens: the type has no rule any more, nor has the database.
        let notes = try await Mirror<RuleNote>(database: opened.database)
        #expect(try opened.rules().isEmpty)
        if let directory = opened.directory {
            let file = directory.appendingPathComponent("relationships/public/rules.ndjson")
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(!text.contains("RuleNote"), "\(text)")
        }
        folders.dataModel.remove(recordID: "work")
        try await folders.flush()
        #expect(try await opened.database.fetch(["n1"], in: .public("RuleNote")).map(\.id) == ["n1"], "no cascade any more")
        #expect(notes.dataModel.map(\.id) == ["n1"])
    }

    @Test(arguments: Kind.allCases)
    func aTypeWithoutRulesWritesNoRules(kind: Kind) async throws {
        let opened = try Self.open(kind)
        defer { opened.cleanup() }
        let notes = try await Mirror<RuleNote>(database: opened.database)
        notes.dataModel.append(RuleNote(id: "n1", folder: Reference(recordID: "none")))
        try await notes.flush()
        #expect(try opened.rules().isEmpty)
        if let directory = opened.directory {
            let relationships = directory.appendingPathComponent("relationships").path
            #expect(!FileManager.default.fileExists(atPath: relationships), "nothing created for rules")
        }
    }
}
