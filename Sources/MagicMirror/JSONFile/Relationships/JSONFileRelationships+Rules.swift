import Foundation

/// The rules file of a scope space: read when it changed, replaced whole when a type's rules
/// change.
extension JSONFileRelationships.Space {
    /// The space's rules, read again when the file at `rules.ndjson` is not the one read last.
    ///
    /// Lines that are not a valid rule (written by another program) are skipped and
    /// reported once, as ``MirrorError/Kind/corruptEntry`` problems; the other rules hold.
    func rules(_ state: inout State, context: JSONFileContext) throws(MirrorError) -> [StoredDeleteRule] {
        guard try openDirectory(&state, context: context, create: false) else { return [] }
        let name = JSONFileRelationships.rulesFile
        let current = JSONFileIO.info(at: state.directoryFD, name)
        if let current, let known = state.rulesInfo, current == known { return state.rules }
        if state.rulesFD >= 0 { close(state.rulesFD) }
        state.rulesFD = -1
        state.rulesInfo = nil
        state.rules = []
        guard current != nil else { return [] }
        let fd: Int32
        do {
            fd = try context.fileSystem.open(at: state.directoryFD, name, flags: O_RDONLY | O_NOFOLLOW)
        } catch where error.code == ENOENT {
            return []
        } catch {
            throw error.mirrorError(file: path(name))
        }
        let bytes: [UInt8]
        do {
            bytes = try JSONFileIO.readAll(fd)
        } catch {
            close(fd)
            throw error.mirrorError(file: path(name))
        }
        state.rulesFD = fd
        state.rulesInfo = JSONFileIO.info(fd)
        state.rules = parseRules(bytes, context: context)
        return state.rules
    }

    /// The rules of a rules file; bad lines are reported and skipped.
    private func parseRules(_ bytes: [UInt8], context: JSONFileContext) -> [StoredDeleteRule] {
        let name = JSONFileRelationships.rulesFile
        var rules: [StoredDeleteRule] = []
        var bad: [Int] = []
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let decoder = JSONDecoder()
        for (number, line) in lines.enumerated() where !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
            if number == 0 {
                guard let header = try? decoder.decode(RulesHeader.self, from: Data(line)),
                      header.format == JSONFileFormat.version
                else {
                    bad.append(number + 1)
                    continue
                }
                continue
            }
            guard let rule = try? decoder.decode(StoredDeleteRule.self, from: Data(line)),
                  (try? rule.validate()) != nil
            else {
                bad.append(number + 1)
                continue
            }
            rules.append(rule)
        }
        if !bad.isEmpty {
            let shown = bad.prefix(5).map(String.init).joined(separator: ", ")
            context.problems.report(
                MirrorError(
                    .corruptEntry,
                    "\(path(name)) has lines that are not valid delete rules (line \(shown)); they are "
                        + "ignored and the \(rules.count) valid ones hold. Opening a mirror of the "
                        + "referring type writes its rules again.",
                    scope: zone.scope, file: path(name)),
                key: "rules \(path(name)) \(bytes.count) \(bytes.hashValue)")
        }
        return rules
    }

    /// Replaces the rules of `referringType` in the file, under the space's lock; nothing is
    /// written when they did not change, and nothing is created for a type without rules
    /// in a space that holds none of its rules (every type without rules registers its
    /// empty set when a mirror of it opens, to remove what an earlier version stored).
    func register(
        _ rules: [StoredDeleteRule], referringType: String, _ state: inout State, context: JSONFileContext
    ) throws(MirrorError) {
        // Without the lock first: usually nothing changes (the file, read once, is only
        // stat-ed), and a type without rules need not create the space's directory.
        let known = try self.rules(&state, context: context)
        if DeleteRuleSet.replacing(known, of: referringType, with: rules) == known,
           state.rulesInfo != nil || rules.isEmpty {
            return
        }
        let lockFD = try lock(&state, context: context)
        defer { FileLock.unlock(lockFD) }
        let existing = try self.rules(&state, context: context)
        let updated = DeleteRuleSet.replacing(existing, of: referringType, with: rules)
        if updated == existing, state.rulesInfo != nil { return }
        var bytes = [UInt8]()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            bytes += try encoder.encode(RulesHeader(format: JSONFileFormat.version)) + [0x0A]
            for rule in updated { bytes += try encoder.encode(rule) + [0x0A] }
        } catch {
            throw MirrorError(.encodingFailed, "cannot encode the delete rules: \(error)", underlying: error)
        }
        try replaceFile(JSONFileRelationships.rulesFile, temporary: JSONFileRelationships.rulesTemporaryFile,
                        with: bytes, state: state, context: context)
        // Read back what is now at the name, keeping it open.
        state.rulesInfo = nil
        _ = try self.rules(&state, context: context)
    }

    /// Writes `bytes` to `temporary`, flushes it and renames it over `name`, then flushes the
    /// directory: the file at `name` is always whole.
    func replaceFile(
        _ name: String, temporary: String, with bytes: [UInt8], state: State, context: JSONFileContext
    ) throws(MirrorError) {
        let fileSystem = context.fileSystem
        var current = temporary
        do throws(FileSystem.Failure) {
            let fd = try fileSystem.open(
                at: state.directoryFD, temporary, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: fileMode)
            defer { close(fd) }
            try fileSystem.write(fd, bytes: bytes)
            try fileSystem.sync(fd)
            current = name
            try fileSystem.rename(at: state.directoryFD, temporary, to: name)
            try fileSystem.sync(state.directoryFD, metadata: true)
        } catch {
            if current == temporary { try? fileSystem.unlink(at: state.directoryFD, temporary) }
            throw error.mirrorError(file: path(current))
        }
    }
}

/// The first line of a rules file.
struct RulesHeader: Codable {
    var format: Int
}
