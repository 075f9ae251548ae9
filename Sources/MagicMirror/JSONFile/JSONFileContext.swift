import Foundation

/// What the zones of one engine share: the root directory, identity, file system seam,
/// subscriptions and problem log.
final class JSONFileContext: Sendable {
    let rootPath: String
    /// An open descriptor of the root directory; every path below it is opened relative to
    /// it, one component at a time, without following symbolic links.
    let rootFD: Int32
    let identifier: String
    /// Whether journal appends reserve space that later appends overwrite in place: read
    /// from `database.json` when the engine opens (format 2), and kept until it closes.
    let reservesJournalSpace: Bool
    let writerID: String
    let fileSystem: FileSystem
    let subscribers: SubscriberList
    let problems: JSONFileProblems
    /// Told the number of waiting commits of a zone whenever one starts waiting: set by
    /// tests of group commit when they open the database, `nil` otherwise.
    let queueObserver: (@Sendable (ZoneID, Int) -> Void)?
    /// How many bytes of a journal a load reads at a time (``JSONFileZone/journalPieceSize``;
    /// tests use small pieces).
    let journalPieceSize: Int

    init(
        rootPath: String, rootFD: Int32, identifier: String, reservesJournalSpace: Bool, writerID: String,
        fileSystem: FileSystem,
        subscribers: SubscriberList, queueObserver: (@Sendable (ZoneID, Int) -> Void)? = nil,
        journalPieceSize: Int = JSONFileZone.journalPieceSize
    ) {
        self.queueObserver = queueObserver
        self.journalPieceSize = journalPieceSize
        self.rootPath = rootPath
        self.rootFD = rootFD
        self.identifier = identifier
        self.reservesJournalSpace = reservesJournalSpace
        self.writerID = writerID
        self.fileSystem = fileSystem
        self.subscribers = subscribers
        self.problems = JSONFileProblems()
    }

    deinit { close(rootFD) }
}
