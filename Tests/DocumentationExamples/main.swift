// mirror-doc-examples: the code of the DocC articles that must run as a program of its
// own (its own `Todo`, the default database). Tests/ExampleTests runs it with
// `$MAGICMIRROR_DIRECTORY` and `$HOME` in a temporary directory.
import Foundation

switch CommandLine.arguments.dropFirst().first {
case "getting-started":
    try await GettingStarted.run()
default:
    FileHandle.standardError.write(Data("usage: mirror-doc-examples getting-started\n".utf8))
    exit(2)
}
