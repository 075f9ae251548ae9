import Foundation

/// One engine of the peer benchmark, driven through the API an application uses: every
/// workload runs the same code against both engines, so the work measured is the same.
protocol PeerStore {
    /// The engine's name in the output.
    static var name: String { get }

    /// Opens (creating) a store in `directory` that flushes every commit to the disk.
    init(directory: URL) async throws

    /// Stores one new record in one durable transaction.
    mutating func insert(_ record: BenchRecord) async throws

    /// Stores many new records in one durable transaction.
    mutating func insert(batch records: [BenchRecord]) async throws

    /// Stores a changed record (one that exists) in one durable transaction.
    mutating func update(_ record: BenchRecord) async throws

    /// Puts the stored records in the shape a later open reads (compacts, checkpoints).
    mutating func settle() async throws

    /// Opens the store in `directory` as a new process would and returns every record.
    static func openAll(directory: URL) async throws -> [BenchRecord]
}

struct PeerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
