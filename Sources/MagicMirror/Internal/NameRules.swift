/// The rules for names that become paths or identities: record types, user names and
/// record ids.
///
/// A valid name is not empty, at most 255 bytes of UTF-8, contains no `/` and no NUL, and
/// is not `.` or `..`.
package enum NameRules {
    /// The longest valid name, in UTF-8 bytes.
    package static let maximumBytes = 255

    /// The reason a name is invalid, or `nil` when it is valid.
    package static func problem(with name: String) -> String? {
        let utf8 = name.utf8
        if utf8.isEmpty { return "is empty" }
        if utf8.count > maximumBytes { return "is \(utf8.count) bytes long; the limit is \(maximumBytes)" }
        if name == "." || name == ".." { return "is '\(name)', which names a directory" }
        if utf8.contains(UInt8(ascii: "/")) { return "contains '/'" }
        if utf8.contains(0) { return "contains a NUL byte" }
        return nil
    }

    /// Throws ``MirrorError/Kind/invalidName`` when `name` is not valid.
    ///
    /// - Parameters:
    ///   - name: The name to check.
    ///   - role: What the name is, for the message ("record type", "user name", "record id").
    package static func check(
        _ name: String, as role: String, scope: Scope? = nil, recordType: String? = nil
    ) throws(MirrorError) {
        guard let problem = problem(with: name) else { return }
        let shown = name.utf8.count > 40 ? String(name.prefix(40)) + "…" : name
        throw MirrorError(
            .invalidName,
            "invalid \(role) \(String(reflecting: shown)): it \(problem)",
            recordIDs: role == "record id" ? [name] : [],
            recordType: role == "record type" ? nil : recordType,
            scope: scope)
    }
}
