// mirror-todo: a shared to-do list that several processes edit live.
//
//     mirror-todo add "Buy milk"
//     mirror-todo list
//     mirror-todo watch          # in a second terminal: prints every change as it happens
import Foundation

let invocation: Invocation
do {
    invocation = try Invocation.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    TodoConsole.fail(error, code: 2)
}

do {
    try await TodoConsole(invocation).run()
    exit(0)
} catch {
    TodoConsole.fail(error, code: 1)
}
