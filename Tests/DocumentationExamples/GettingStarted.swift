// The code of the article "Getting Started"
// (Sources/MagicMirror/Documentation.docc/GettingStarted.md), compiled here and run by
// Tests/ExampleTests/DocumentationExampleRunTests.swift. Every block of the article appears
// here exactly as printed, which is why they are not indented; the package's
// DocumentationCodeBlockTests check it. Change both together.

import Foundation
import MagicMirror

struct Todo: Recordable {
    var id = UUID()
    var title: String
    var done = false
    var created = Date()
}

struct Recipe: Recordable {
    struct Ingredient: Codable, Sendable, Equatable {   // a nested type conforms too
        var name: String
        var grams: Double
    }
    enum Course: String, Codable, Sendable {            // a raw-value enum is Equatable already
        case starter, main, dessert
    }

    var id: String                                      // a String id works like a UUID
    var title: String
    var course = Course.main
    var ingredients: [Ingredient] = []
}

struct Reading: Recordable {
    static let recordType = "SensorReading"             // stored under this name
    var id: Int                                         // neither a UUID nor a String,
    var recordID: String { String(id) }                 // so say how it becomes one
    var celsius: Double
}

/// Runs the article's code from "Open a mirror" to "Handle errors", in order.
enum GettingStarted {
    static func run() async throws {
let todos = try await Mirror<Todo>()

let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
let database = try JSONFileDatabase(directory: support.appending(path: "MyApp"))
let privateTodos = try await Mirror<Todo>(database: database, scope: .private)

todos.dataModel.append(Todo(title: "Buy milk"))
todos.dataModel[0].done = true
todos.dataModel.remove(at: 0)
try await todos.flush()

func show(_ items: [Todo]) {
    for item in items { print(item.done ? "[x]" : "[ ]", item.title) }
}

todos.dataModel.append(Todo(title: "Call mum"))
show(todos.dataModel.array)                             // the whole list, without a copy
show(todos.dataModel.filter { !$0.done })               // filter gives an array here
if let call = todos.dataModel.first(where: { $0.title == "Call mum" }) {
    todos.dataModel[recordID: call.recordID]?.done = true  // by id: right even if it moved
}

let observation = todos.observe { items in              // now, then after changes
    print(items.filter { !$0.done }.count, "to do")
}

let plants = Todo(title: "Water the plants")
let changes = todos.changes()                             // every change from now on
todos.dataModel.append(plants)
for await change in changes {                           // it never ends: break out when done
    print(change.kind, change.record?.title ?? "", change.origin, change.state)
    if change.recordID == plants.recordID, change.state == .committed { break }
}
observation.cancel()

let token = NotificationCenter.default.addObserver(forName: .mirrorError, object: nil, queue: nil) { note in
    if let error = note.object as? MirrorError { print(error) }
}

        NotificationCenter.default.removeObserver(token)
        // The other types of the article are stored as well.
        privateTodos.dataModel.append(Todo(title: "Private"))
        let recipes = try await Mirror<Recipe>(database: database)
        recipes.dataModel.append(Recipe(id: "soup", title: "Soup", ingredients: [.init(name: "leek", grams: 300)]))
        let readings = try await Mirror<Reading>(database: database)
        readings.dataModel.append(Reading(id: 1, celsius: 21.5))
        try await todos.flush()
        try await privateTodos.flush()
        try await recipes.flush()
        try await readings.flush()
        print("stored", todos.dataModel.count, privateTodos.dataModel.count, recipes.dataModel.count,
              readings.dataModel.count, "in", support.path)
    }
}
