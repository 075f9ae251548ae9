// The complete example of the article "Testing code that uses MagicMirror"
// (Sources/MirrorTesting/Documentation.docc/TestingWithMirrorTesting.md), compiled and run
// here. Every code block of the article appears verbatim in this file, which
// DocumentationArticleTests checks: change both together.

import Foundation
import MagicMirror

/// An item on a shopping list that everyone who opens the database shares.
struct GroceryItem: Recordable {
    var id = UUID()
    var name: String
    var isBought = false
}

/// The app's model of the shopping list.
final class ShoppingList: Sendable {
    let mirror: Mirror<GroceryItem>

    init(database: any RecordDatabase, configuration: MirrorConfiguration = MirrorConfiguration()) async throws {
        mirror = try await Mirror(database: database, configuration: configuration)
    }

    /// The names of the items still to buy, in the list's order.
    var itemsToBuy: [String] {
        mirror.dataModel.filter { !$0.isBought }.map(\.name)
    }

    /// Whether some changes are not saved yet, for a "Saving…" label.
    var isSaving: Bool { mirror.hasPendingChanges }

    func add(_ name: String) {
        mirror.dataModel.append(GroceryItem(name: name))
    }

    func markBought(_ name: String) {
        guard let index = mirror.dataModel.firstIndex(where: { $0.name == name }) else { return }
        mirror.dataModel[index].isBought = true
    }
}

import MirrorTesting
import Testing

// The error recorders of these tests collect every error about GroceryItem, so the tests
// run one at a time; other suites use other record types.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ShoppingListTests {
    /// Retries a failed commit after 5 ms instead of 100 ms.
    let quickRetries = MirrorConfiguration(retryDelay: .milliseconds(5))

    @Test func anItemIsShownAtOnceAndSavedDespiteAFullDisk() async throws {
        let database = InMemoryDatabase()
        let errors = ErrorNotificationRecorder(recordType: GroceryItem.recordType)
        let list = try await ShoppingList(database: database, configuration: quickRetries)

        database.failNextCommits(2, with: .diskFull)
        list.add("Milk")
        #expect(list.itemsToBuy == ["Milk"])
        #expect(list.isSaving)

        try await list.mirror.waitUntilCommitted(timeout: .seconds(60))
        #expect(!list.isSaving)
        #expect(try database.records(GroceryItem.self).map(\.name) == ["Milk"])
        #expect(database.commitLog.map(\.isFailed) == [true, true, false])
        #expect(errors.errors.map(\.kind) == [.diskFull, .diskFull])
    }

    @Test func itemsAddedOnAnotherDeviceAppear() async throws {
        let database = InMemoryDatabase()
        let list = try await ShoppingList(database: database)

        try await database.simulateSave(GroceryItem(name: "Eggs"), by: "phone")
        try await list.mirror.waitUntil(timeout: .seconds(60)) { items in
            items.contains { $0.name == "Eggs" }
        }
        #expect(list.itemsToBuy == ["Eggs"])
    }

    @Test func aChangeWaitsWhileTheDatabaseIsReadOnly() async throws {
        let database = InMemoryDatabase()
        let bread = GroceryItem(name: "Bread")
        try await database.simulateSave(bread)
        let list = try await ShoppingList(database: database, configuration: quickRetries)
        let errors = ErrorNotificationRecorder(recordType: GroceryItem.recordType)

        database.availability = .readOnly
        list.markBought("Bread")
        let reported = try await errors.waitForErrors(count: 1, timeout: .seconds(60))
        #expect(reported.first?.kind == .readOnly)
        #expect(list.itemsToBuy.isEmpty)
        #expect(list.isSaving)
        #expect(try database.records(GroceryItem.self).first?.isBought == false)

        database.availability = .available
        try await list.mirror.waitUntilCommitted(timeout: .seconds(60))
        #expect(try database.records(GroceryItem.self).first?.isBought == true)
    }
}
