import Foundation
import MagicMirror
import Testing

private struct UUIDTodo: Recordable {
    var id = UUID()
    var title: String
}

private struct StringNote: Recordable {
    var id: String
    var text: String
}

private struct Renamed: Recordable {
    static let recordType = "Task"
    var id: Int
    var recordID: String { "task-\(id)" }
}

@Suite(.timeLimit(.minutes(5))) struct RecordableTests {
    @Test func recordTypeDefaultsToTheTypeName() {
        #expect(UUIDTodo.recordType == "UUIDTodo")
        #expect(StringNote.recordType == "StringNote")
        #expect(Renamed.recordType == "Task")
    }

    @Test func recordIDComesFromTheID() {
        let id = UUID()
        #expect(UUIDTodo(id: id, title: "x").recordID == id.uuidString)
        #expect(StringNote(id: "n1", text: "x").recordID == "n1")
        #expect(Renamed(id: 7).recordID == "task-7")
    }
}
