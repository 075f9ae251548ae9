import Foundation

/// What a ``Mirror`` does with stored records that do not decode as its record type: a
/// field added without a migration, a field whose type changed, a record written by another
/// program.
///
/// The default, ``skip``, opens the mirror with every record that decodes and makes the
/// others impossible to miss rather than fatal: they are listed in
/// ``Mirror/skippedRecords``, reported once each as ``MirrorError/Kind/decodingFailed``
/// (see ``MirrorError`` for where errors go), and, in debug builds, written
/// to standard error as one line per batch, such as:
///
/// ```
/// MagicMirror: 3 stored records of public/Note do not decode as Note and are skipped
/// (left untouched; see Mirror.skippedRecords). The first: stored record … does not decode
/// as Note: field "pinned" is missing and Note has no migration that adds it …
/// ```
///
/// ``fail`` makes opening throw instead, so that an app cannot start with records missing.
/// ``skip(log:)`` sends the lines to your own logger (or nowhere).
///
/// ```swift
/// let strict = MirrorConfiguration(undecodableRecords: .fail)
/// let logged = MirrorConfiguration(undecodableRecords: .skip(log: { line in print(line) }))
/// ```
///
/// Skipping is the default because a database is shared: one record written by a newer
/// version of the app, or by another program, must not keep every older reader from
/// opening. A skipped record is never changed or removed by the mirror: an edit that would
/// overwrite it is refused (see ``Mirror/skippedRecords``), and only
/// ``Mirror/discardSkippedRecord(recordID:)``, called on purpose, deletes it.
public struct UndecodableRecordPolicy: Sendable {
    /// Whether opening throws when stored records do not decode.
    package let failsOpening: Bool
    /// Where the lines about skipped records go; `nil` for nowhere.
    package let log: (@Sendable (String) -> Void)?

    /// Skips them: the mirror opens with the records that decode, lists the others in
    /// ``Mirror/skippedRecords``, reports each once, and in debug builds (when `DEBUG` is
    /// defined, as in `swift build` and Xcode's Debug configuration) writes one line per
    /// batch of them to standard error. The default.
    ///
    /// The environment variable `MAGICMIRROR_SKIPPED_RECORDS_LOG=off` keeps that line quiet,
    /// for a test run whose tests store records that do not decode on purpose
    /// (`Scripts/test-all.sh` sets it); the records are still listed and reported.
    public static var skip: UndecodableRecordPolicy {
        #if DEBUG
        UndecodableRecordPolicy(failsOpening: false, log: UndecodableRecordPolicy.writeToStandardError)
        #else
        UndecodableRecordPolicy(failsOpening: false, log: nil)
        #endif
    }

    /// Skips them as ``skip`` does, and hands each line about them to `log` instead of
    /// standard error, in every build; `{ _ in }` writes nothing.
    ///
    /// - Parameter log: Called with one line per batch of skipped records (those found
    ///   when the mirror opens, then those of each change that arrives), on the thread that
    ///   found them, with no lock held.
    public static func skip(log: @escaping @Sendable (String) -> Void) -> UndecodableRecordPolicy {
        UndecodableRecordPolicy(failsOpening: false, log: log)
    }

    /// Makes opening the mirror throw a ``MirrorError/Kind/decodingFailed`` error naming every
    /// stored record that does not decode (its ``MirrorError/recordIDs``) and why the first
    /// one does not.
    ///
    /// Records that stop decoding later (saved by another writer while the mirror is open)
    /// cannot make anything throw: they are skipped as with ``skip``.
    public static var fail: UndecodableRecordPolicy {
        UndecodableRecordPolicy(failsOpening: true, log: UndecodableRecordPolicy.skip.log)
    }

    /// Fails opening as ``fail`` does, and hands the lines about records skipped later to
    /// `log` instead of standard error, in every build.
    public static func fail(log: @escaping @Sendable (String) -> Void) -> UndecodableRecordPolicy {
        UndecodableRecordPolicy(failsOpening: true, log: log)
    }

    private init(failsOpening: Bool, log: (@Sendable (String) -> Void)?) {
        self.failsOpening = failsOpening
        self.log = log
    }

    /// The environment variable that, set to `off`, keeps the default log quiet.
    package static let quietVariable = "MAGICMIRROR_SKIPPED_RECORDS_LOG"

    private static let writeToStandardError: @Sendable (String) -> Void = { line in
        guard ProcessInfo.processInfo.environment[quietVariable] != "off" else { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// The line about the skipped records of one batch, or `nil` for none.
    package static func line(zone: ZoneID, recordType: String, skipped: [MirrorError]) -> String? {
        guard let first = skipped.first else { return nil }
        let count = skipped.count == 1
            ? "1 stored record of \(zone) does not decode as \(recordType) and is skipped"
            : "\(skipped.count) stored records of \(zone) do not decode as \(recordType) and are skipped"
        return "MagicMirror: \(count) (left untouched; see Mirror.skippedRecords)."
            + (skipped.count == 1 ? " " : " The first: ") + first.message
    }
}
