// mirror-todo: a shared to-do list that several processes edit live.
//
//     mirror-todo add "Buy milk"
//     mirror-todo list
//     mirror-todo watch          # in a second terminal: the list, then every change as it happens
//
// The console itself is TodoConsoleKit, shared with mirror-todo-postgres (Adapters/PostgreSQL).
import TodoConsoleKit

await TodoConsole.main(program: "mirror-todo", storage: .jsonFiles)
