#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import MagicMirror

/// The commands of `mirror-db`. Each returns the process's exit status.
struct MirrorDB {
    struct UsageError: Error {
        var message: String
    }

    let command: String
    let directory: String
    let rest: [String]
    let json: Bool

    init(arguments: [String], json: Bool) throws {
        guard arguments.count >= 2 else { throw UsageError(message: "a command and a database directory are needed") }
        command = arguments[0]
        directory = URL(fileURLWithPath: arguments[1]).standardizedFileURL.path
        rest = Array(arguments.dropFirst(2))
        self.json = json
        let maximum = ["stats": 0, "verify": 0, "upgrade": 0][command] ?? 1
        guard ["show", "log", "stats", "verify", "compact", "quarantine", "upgrade"].contains(command) else {
            throw UsageError(message: "unknown command \(command)")
        }
        guard rest.count <= maximum else { throw UsageError(message: "too many arguments for \(command)") }
    }

    func run() async throws -> Int32 {
        try requireDatabase()
        switch command {
        case "show": show()
        case "log": log()
        case "stats": stats()
        case "verify": return verify()
        case "compact": try await compact()
        case "upgrade": try upgrade()
        default: return try quarantine()
        }
        return 0
    }

    /// Refuses a directory that is no database, rather than reporting it empty (or, for
    /// `compact`, creating one).
    private func requireDatabase() throws {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MirrorError(.notFound, "\(directory): no such directory")
        }
        let markers = ["database.json", "public", "private"]
        guard markers.contains(where: { manager.fileExists(atPath: directory + "/" + $0) }) else {
            throw MirrorError(
                .notFound, "\(directory) is not a MagicMirror database (it has no database.json, public/ or private/)")
        }
    }

    // MARK: Reading

    /// The zones asked for (every zone, or those of the record type given), read.
    private func inspectedZones(progress: String? = nil) -> (zones: [JSONFileInspection.Zone], problems: [JSONFileInspection.Problem]) {
        let listed = JSONFileInspection.zones(in: directory)
        let wanted = listed.zones.filter { rest.first == nil || $0.0.recordType == rest.first }
        var zones: [JSONFileInspection.Zone] = []
        for (index, (id, path)) in wanted.enumerated() {
            if let progress { Progress.show("\(progress) \(Output.name(id)) (\(index + 1)/\(wanted.count))") }
            zones.append(JSONFileInspection.inspect(id, at: path))
        }
        Progress.clear()
        return (zones, listed.problems)
    }

    private func show() {
        let zones = inspectedZones(progress: "reading").zones
        if json {
            Output.printJSON(zones.map { zone in
                ["zone": Output.zoneObject(zone.id), "records": zone.liveRecords.map(Output.recordObject)] as [String: Any]
            })
            return
        }
        if zones.isEmpty { print("no zones\(rest.first.map { " of type \($0)" } ?? "")") }
        for zone in zones {
            let records = zone.liveRecords
            print("\(Output.name(zone.id)): \(Output.count(records.count, "record"))")
            for (number, record) in records.enumerated() {
                print("  \(number + 1). \(record.id)  version \(record.version)  created \(Output.date(record.created))"
                    + "  modified \(Output.date(record.modified)) by \(record.writer)")
                print("     \(Output.fieldsText(record.fields))")
            }
        }
    }

    private func log() {
        let zones = inspectedZones(progress: "reading").zones
        if json {
            Output.printJSON(zones.map { zone in
                [
                    "zone": Output.zoneObject(zone.id), "generation": zone.generation,
                    "commits": zone.history.map { commit in
                        ["sequence": commit.sequence, "changes": commit.records.map(Output.changeObject)] as [String: Any]
                    },
                ] as [String: Any]
            })
            return
        }
        for zone in zones {
            let base = zone.snapshotHeader.map { " since snapshot sequence \($0.sequence)" } ?? ""
            print("\(Output.name(zone.id)), generation \(zone.generation): \(Output.count(zone.history.count, "commit"))\(base)")
            for commit in zone.history {
                for record in commit.records {
                    let what = record.isDeleted
                        ? "deleted \(record.id)"
                        : (record.version == 1 ? "created" : "changed") + " \(record.id) (version \(record.version)): "
                            + Output.fieldsText(record.fields)
                    print("  #\(commit.sequence)  \(Output.date(record.modified))  \(record.writer)  \(what)")
                }
            }
        }
    }

    private func stats() {
        let zones = inspectedZones(progress: "reading").zones
        let rows: [[String: Any]] = zones.map { zone in
            [
                "zone": Output.zoneObject(zone.id), "records": zone.liveRecords.count,
                "deleted": zone.records.count - zone.liveRecords.count, "commitsInJournal": zone.history.count,
                "generation": zone.generation, "snapshotBytes": zone.snapshotBytes, "journalBytes": zone.journalBytes,
                "quarantineFiles": zone.quarantine.count,
            ]
        }
        let format = JSONFileInspection.databaseFormat(in: directory)
        if json {
            var object: [String: Any] = ["database": directory, "zones": rows]
            object["format"] = format
            Output.printJSON(object)
            return
        }
        let formatText = format.map { ", format \($0)\($0 < 2 ? " (mirror-db upgrade moves it to 2)" : "")" } ?? ""
        print("database \(directory)\(formatText): \(Output.count(zones.count, "zone"))")
        for zone in zones {
            let ratio = zone.snapshotBytes > 0
                ? String(format: "%.1f× the snapshot", Double(zone.journalBytes) / Double(zone.snapshotBytes))
                : "no snapshot yet"
            print("  \(Output.name(zone.id)): \(Output.count(zone.liveRecords.count, "record")), "
                + "\(zone.records.count - zone.liveRecords.count) deleted; snapshot \(Output.bytes(zone.snapshotBytes)), "
                + "journal \(Output.bytes(zone.journalBytes)) (\(Output.count(zone.history.count, "commit")), \(ratio)); "
                + "\(Output.count(zone.quarantine.count, "quarantine file"))")
        }
    }

    private func verify() -> Int32 {
        let (zones, listProblems) = inspectedZones(progress: "verifying")
        var problems = listProblems
        if let problem = JSONFileInspection.checkDatabaseFile(in: directory) { problems.insert(problem, at: 0) }
        problems += zones.flatMap(\.problems)
        let records = zones.reduce(0) { $0 + $1.liveRecords.count }
        if json {
            Output.printJSON([
                "database": directory, "zones": zones.count, "records": records, "ok": problems.isEmpty,
                "problems": problems.map { problem in
                    ["kind": problem.kind, "file": problem.file, "offset": problem.offset as Any, "message": problem.message]
                        .compactMapValues { $0 is NSNull ? nil : $0 }
                },
            ])
        } else if problems.isEmpty {
            print("ok: \(Output.count(zones.count, "zone")), \(Output.count(records, "record")), no problems")
        } else {
            for problem in problems { print("\(problem.kind): \(problem)") }
            print("\(Output.count(problems.count, "problem")) in \(Output.count(zones.count, "zone"))")
        }
        return problems.isEmpty ? 0 : 1
    }

    private func compact() async throws {
        let before = inspectedZones().zones
        let database = try JSONFileDatabase(directory: URL(fileURLWithPath: directory))
        var rows: [[String: Any]] = []
        for (index, zone) in before.enumerated() {
            Progress.show("compacting \(Output.name(zone.id)) (\(index + 1)/\(before.count))")
            try await database.compact(zone.id)
            let after = JSONFileInspection.inspect(zone.id, at: zone.path)
            rows.append([
                "zone": Output.zoneObject(zone.id), "generation": after.generation,
                "journalBytesBefore": zone.journalBytes, "snapshotBytes": after.snapshotBytes,
                "journalBytes": after.journalBytes, "records": after.liveRecords.count,
            ])
            if !json {
                print("\(Output.name(zone.id)): journal \(Output.bytes(zone.journalBytes)) → \(Output.bytes(after.journalBytes)), "
                    + "snapshot \(Output.bytes(after.snapshotBytes)) with \(after.liveRecords.count) records, "
                    + "generation \(after.generation)")
            }
        }
        Progress.clear()
        if json { Output.printJSON(rows) }
    }

    /// Rewrites `database.json` in the format this version creates. Older processes read it
    /// when they open the database only, so the note says to stop them first.
    private func upgrade() throws {
        let result = try JSONFileUpgrade.upgrade(directory: directory)
        let note = "Versions of MagicMirror from before append checksums refuse a database in format "
            + "\(result.to) when they open it; one that had it open already would misread its journals "
            + "from now on, so every process running one on this database must have been stopped first. "
            + "Processes of this version that opened it before the upgrade keep appending as format "
            + "\(result.from) asks (safely) until they open it again."
        if json {
            Output.printJSON([
                "database": directory, "identifier": result.identifier, "from": result.from, "to": result.to,
                "note": note,
            ])
        } else {
            print("upgraded \(directory) from format \(result.from) to format \(result.to)")
            print(note)
        }
    }

    private func quarantine() throws -> Int32 {
        let zones = JSONFileInspection.zones(in: directory).zones.map { JSONFileInspection.inspect($0.0, at: $0.1) }
        let files = zones.flatMap { zone in zone.quarantine.map { (zone, $0) } }
        guard let wanted = rest.first else {
            let rows: [[String: Any]] = files.map { zone, name in
                ["zone": Output.zoneObject(zone.id), "file": zone.path + "/" + name,
                 "bytes": Output.size(zone.path + "/" + name), "reason": Output.quarantineReason(name)]
            }
            if json {
                Output.printJSON(rows)
            } else if files.isEmpty {
                print("no quarantine files")
            } else {
                for (zone, name) in files {
                    print("\(Output.name(zone.id))/\(name)  \(Output.bytes(Output.size(zone.path + "/" + name)))  "
                        + Output.quarantineReason(name))
                }
            }
            return 0
        }
        let match = files.first { zone, name in
            name == wanted || zone.path + "/" + name == URL(fileURLWithPath: wanted).standardizedFileURL.path
                || "\(Output.name(zone.id))/\(name)" == wanted
        }
        guard let (zone, name) = match else {
            throw MirrorError(.notFound, "no quarantine file \(wanted) in \(directory) (mirror-db quarantine DIR lists them)")
        }
        let path = zone.path + "/" + name
        let bytes = FileManager.default.contents(atPath: path) ?? Data()
        if json {
            Output.printJSON([
                "zone": Output.zoneObject(zone.id), "file": path, "bytes": bytes.count,
                "reason": Output.quarantineReason(name), "text": String(decoding: bytes, as: UTF8.self),
                "base64": bytes.base64EncodedString(),
            ])
        } else {
            print("\(path): \(bytes.count) bytes, \(Output.quarantineReason(name))")
            print(Output.escaped(bytes))
        }
        return 0
    }
}
