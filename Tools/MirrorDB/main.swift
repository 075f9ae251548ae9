// mirror-db: look inside a MagicMirror JSON-file database (see `mirror-db help`).
// Every command but `compact` and `upgrade` only reads; `verify` runs the checks of the engine's recovery
// on open, with the engine's own parsers, and exits non-zero when it finds a problem.
import Foundation
import MagicMirror

let synopsis = "usage: mirror-db [--json] COMMAND DIR [ARGUMENTS]"
let usage = """
    \(synopsis)

    Looks inside the MagicMirror database in directory DIR (a JSONFileDatabase).

    commands:
      show DIR [TYPE]          the records of every zone (or of record type TYPE), in creation
                               order, with readable dates
      log DIR [TYPE]           the journal as a history: sequence, when, who (writer id), what
      stats DIR                the database's format; zones, records, deleted records, bytes of
                               snapshot and journal
      verify DIR               every check recovery makes on open, without changing a byte;
                               exits with status 1 when it finds a problem
      compact DIR [TYPE]       compacts zones: a new snapshot, an empty journal (this one writes)
      quarantine DIR [FILE]    lists the quarantine files, or prints one (bytes recovery set aside)
      upgrade DIR              rewrites database.json in format 2, whose journals reserve space that
                               appends overwrite in place (this one writes). Versions of MagicMirror
                               from before append checksums refuse a database in format 2: stop every
                               process that runs one on DIR first

    options:
      --json                   one JSON document on standard output instead of text
      -h, --help               this help

    Dates: a record's created and modified times are shown in UTC. A field whose name looks
    like a date (created, date, time, due, deadline, …At) and whose value is a number is
    shown as the date it encodes (Foundation's default: seconds since 2001-01-01).
    Progress goes to standard error, only when it is a terminal.

    """

var arguments = Array(CommandLine.arguments.dropFirst())
let json = arguments.contains("--json")
arguments.removeAll { $0 == "--json" }
if arguments.isEmpty || arguments.contains("-h") || arguments.contains("--help") || arguments.first == "help" {
    print(usage, terminator: "")
    exit(arguments.isEmpty ? 2 : 0)
}

do {
    let tool = try MirrorDB(arguments: arguments, json: json)
    exit(try await tool.run())
} catch let error as MirrorDB.UsageError {
    // One line and the synopsis, not the whole help: the mistake stays on screen.
    FileHandle.standardError.write(Data(
        "mirror-db: \(error.message)\n\(synopsis) (mirror-db help lists the commands)\n".utf8))
    exit(2)
} catch let error as MirrorError {
    FileHandle.standardError.write(Data("mirror-db: \(error.message)\n".utf8))
    exit(1)
} catch {
    FileHandle.standardError.write(Data("mirror-db: \(error)\n".utf8))
    exit(1)
}
