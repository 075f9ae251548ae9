// mirror-tour: the program of the README's "Usage" section and of the documentation's
// landing page, exactly as they print it (a test checks that, and runs this program).
// `swift run mirror-tour` runs it on the default database; it removes what it adds.

import Foundation
import MagicMirror

struct Todo: Recordable {                        // Codable fields and an id: see Getting Started
    var id = UUID()
    var title: String
    var done = false
    var created = Date()
}

let todos = try await Mirror<Todo>()             // opens the default database, loads every Todo
let observation = todos.observe { items in       // now, then a snapshot after changes
    print("observed", items.count, "to-dos")
}
let changes = todos.changes()                      // every change from now on; it never ends

let milk = Todo(title: "Buy milk")
todos.dataModel.append(milk)                     // the array changes at once…
for await change in changes.prefix(2) {          // …and the change is committed in the background
    print(change.kind, change.state)             // "inserted pending", then "inserted committed"
}
todos.dataModel[recordID: milk.recordID]?.done = true   // edit by id: right while others write
let open = todos.dataModel.filter { !$0.done }   // dataModel reads like an array: see RecordArray
print(open.count, "open of", todos.dataModel.count)
todos.dataModel.remove(recordID: milk.recordID)
try await todos.flush()                          // every change above is durable now
observation.cancel()
