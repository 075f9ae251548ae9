import Foundation

/// The rules for names that become paths or identities: record types, user names and
/// record ids.
///
/// A valid name is not empty, at most 255 bytes of UTF-8, contains no `/` and no NUL, and
/// is not `.` or `..`. Names are compared by their UTF-8 bytes (see `IDKey`), so a record
/// type or user name, which becomes a directory name, must also be in Unicode Normalization
/// Form C: file systems that normalise names (macOS's) would otherwise give two names one
/// directory. Record ids are stored inside files, so any spelling is an id of its own.
package enum NameRules {
    /// The longest valid name, in UTF-8 bytes.
    package static let maximumBytes = 255

    /// The reason a name is invalid, or `nil` when it is valid.
    ///
    /// - Parameter becomesFileName: The name is a record type or user name, which names a
    ///   directory, and must be in NFC.
    package static func problem(with name: String, becomesFileName: Bool = false) -> String? {
        let utf8 = name.utf8
        if utf8.isEmpty { return "is empty" }
        if utf8.count > maximumBytes { return "is \(utf8.count) bytes long; the limit is \(maximumBytes)" }
        if name == "." || name == ".." { return "is '\(name)', which names a directory" }
        // One pass over the contiguous bytes (a record id is checked for every record read).
        var bytes = name
        let (slash, nul) = bytes.withUTF8 { ($0.contains(UInt8(ascii: "/")), $0.contains(0)) }
        if slash { return "contains '/'" }
        if nul { return "contains a NUL byte" }
        if becomesFileName, !utf8.allSatisfy({ $0 < 0x80 }) {
            let composed = name.precomposedStringWithCanonicalMapping
            if !composed.utf8.elementsEqual(utf8) {
                return "is not in Unicode Normalization Form C; as a directory name it must be "
                    + "spelled \(String(reflecting: composed))"
            }
        }
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
        guard let problem = problem(with: name, becomesFileName: role != "record id") else { return }
        let shown = name.utf8.count > 40 ? String(name.prefix(40)) + "…" : name
        throw MirrorError(
            .invalidName,
            "invalid \(role) \(String(reflecting: shown)): it \(problem)",
            recordIDs: role == "record id" ? [name] : [],
            recordType: role == "record type" ? nil : recordType,
            scope: scope)
    }
}
