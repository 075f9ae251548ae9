import Foundation
import Synchronization

/// Assets in the JSON-file database: files in each zone's `assets` directory (see
/// ``JSONFileAssetStore`` and <doc:JSONFileFormat>).
extension JSONFileDatabase: AssetDatabase {
    public func storeAsset(contentsOf file: URL, in zone: ZoneID) async throws -> Asset {
        let store = try assetStore(zone)
        let durable = options.durability == .durable
        let path = file.path
        return try await storeCancellably(store) { isCancelled throws(MirrorError) in
            let fd = openForReading(path)
            guard fd >= 0 else {
                let code = errno
                var error = MirrorError.posix(code, "open", file: path)
                if code == ENOENT { error.kind = .notFound }
                error.message = "cannot read \(path) to store it as an asset: \(String(cString: strerror(code)))"
                throw error.adding(recordType: zone.recordType, scope: zone.scope)
            }
            defer { close(fd) }
            return try store.store(durable: durable, isCancelled: isCancelled) { buffer throws(MirrorError) in
                while true {
                    let count = read(fd, buffer.baseAddress, buffer.count)
                    if count >= 0 { return count }
                    if errno != EINTR {
                        throw MirrorError.posix(errno, "read", file: path)
                            .adding(recordType: zone.recordType, scope: zone.scope)
                    }
                }
            }
        }
    }

    public func storeAsset(_ data: Data, in zone: ZoneID) async throws -> Asset {
        let store = try assetStore(zone)
        let durable = options.durability == .durable
        return try await storeCancellably(store) { isCancelled throws(MirrorError) in
            var offset = data.startIndex
            return try store.store(durable: durable, isCancelled: isCancelled) { buffer in
                let count = min(buffer.count, data.endIndex - offset)
                data.copyBytes(to: buffer.bindMemory(to: UInt8.self), from: offset..<(offset + count))
                offset += count
                return count
            }
        }
    }

    public func fileURL(for asset: Asset, in zone: ZoneID) async throws -> URL {
        try assetStore(zone).fileURL(for: asset)
    }

    public func contents(
        of asset: Asset, in zone: ZoneID, chunkSize: Int
    ) -> AsyncThrowingStream<Data, any Error> {
        let reader = AssetReader(asset: asset, chunkSize: chunkSize) { () throws(MirrorError) in
            let store = try self.assetStore(zone)
            return (store, try store.open(asset))
        }
        // Each piece is read and hashed on a dispatch thread, not on one of the few threads
        // tasks run on.
        return AsyncThrowingStream { try await runBlocking { () throws(MirrorError) in try reader.next() } }
    }

    @discardableResult
    public func removeUnreferencedAssets(in zone: ZoneID) async throws -> Int {
        let handle = try engine.zone(zone)
        let store = try assetStore(zone)
        return try await runBlocking { () throws(MirrorError) -> Int in
            try store.removeUnreferenced(listing: handle.fileNames(in:)) { () throws(MirrorError) in
                try handle.read { state in
                    var digests = Set<String>()
                    for record in state.records.values {
                        if let fields = record.fields { AssetReferences.collect(in: fields, into: &digests) }
                    }
                    return digests
                }
            }
        }
    }

    /// Runs `commit` of `operations`; when they refer to assets, only while every one of
    /// them is stored, and no collection can remove them until the commit is done (see
    /// ``JSONFileAssetStore/holdReferences(_:recordIDs:)``).
    ///
    /// - Throws: ``MirrorError/Kind/invalidRecord`` for a `"$asset"` value that is not a
    ///   digest, ``MirrorError/Kind/notFound`` for a missing asset; nothing is stored then
    ///   (``MirrorError/nothingStored``).
    func committingAssetReferences(
        of operations: [RecordOperation], in zone: ZoneID, _ commit: () async throws -> CommitOutcome
    ) async throws -> CommitOutcome {
        let digests = try MirrorError.beforeStoring { () throws(MirrorError) in
            try AssetReferences.digests(in: operations)
        }
        if digests.isEmpty { return try await commit() }
        let store = try MirrorError.beforeStoring { () throws(MirrorError) in try assetStore(zone) }
        let lockFD: Int32
        do {
            lockFD = try await store.holdReferences(digests, recordIDs: operations.map(\.recordID))
        } catch {
            var failure = error
            failure.nothingStored = true
            throw failure
        }
        defer { close(lockFD) }
        let outcome = try await commit()
        if outcome.isApplied { store.committed(digests) }
        return outcome
    }

    /// The asset store of a zone, after loading the zone (which validates its name and
    /// creates its directories).
    func assetStore(_ zone: ZoneID) throws(MirrorError) -> JSONFileAssetStore {
        _ = try engine.zone(zone)
        return engine.assetStores.withLock { stores in
            if let store = stores[zone] { return store }
            let store = JSONFileAssetStore(zone: zone, context: engine.context)
            stores[zone] = store
            return store
        }
    }

    /// Runs a store on a dispatch thread; cancelling the calling task stops it between
    /// pieces and removes what was copied.
    private func storeCancellably(
        _ store: JSONFileAssetStore,
        _ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws(MirrorError) -> Asset
    ) async throws -> Asset {
        let cancelled = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await runBlocking { () throws(MirrorError) in
                try work { cancelled.isSet }
            }
        } onCancel: {
            cancelled.set()
        }
    }
}

/// Set once, read from any thread.
private final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

/// Opens a file for reading (following links: it is the caller's own file).
private func openForReading(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC)
}

/// Reads an asset's file piece by piece, hashing as it goes; checks the digest at the end.
final class AssetReader: Sendable {
    private struct State {
        var fd: Int32 = -1
        var store: JSONFileAssetStore?
        var hash = SHA256()
        var offset = 0
        var finished = false
    }

    private let asset: Asset
    private let chunkSize: Int
    private let opener: @Sendable () throws(MirrorError) -> (JSONFileAssetStore, Int32)
    private let state = Mutex(State())

    init(
        asset: Asset, chunkSize: Int,
        open: @escaping @Sendable () throws(MirrorError) -> (JSONFileAssetStore, Int32)
    ) {
        self.asset = asset
        self.chunkSize = max(1, chunkSize)
        self.opener = open
    }

    deinit {
        state.withLock { state in
            if state.fd >= 0 { close(state.fd) }
        }
    }

    /// The next piece, or `nil` after the last one once the bytes matched the asset.
    /// Blocks while it reads.
    func next() throws(MirrorError) -> Data? {
        try state.withLock { state throws(MirrorError) -> Data? in
            if state.finished { return nil }
            if state.fd < 0 {
                do throws(MirrorError) {
                    (state.store, state.fd) = try opener()
                } catch {
                    state.finished = true
                    throw error
                }
            }
            let fd = state.fd
            let want = min(chunkSize, max(asset.size - state.offset, 0) + 1)
            var data = Data(count: want)
            let count = data.withUnsafeMutableBytes { raw -> Int in
                while true {
                    let count = pread(fd, raw.baseAddress, want, off_t(state.offset))
                    if count >= 0 || errno != EINTR { return count }
                }
            }
            guard let store = state.store else { return nil }
            if count < 0 {
                state.finished = true
                throw MirrorError.posix(errno, "read", file: store.directoryPath + "/" + asset.digest)
                    .adding(recordType: store.zone.recordType, scope: store.zone.scope)
            }
            if count == 0 || state.offset + count > asset.size {
                state.finished = true
                close(fd)
                state.fd = -1
                if state.offset + count > asset.size {
                    throw store.changedFile(asset, "has more than \(asset.size) bytes")
                }
                if state.offset < asset.size {
                    throw store.changedFile(asset, "has \(state.offset) bytes, not \(asset.size)")
                }
                guard state.hash.finish() == asset.digest else {
                    throw store.changedFile(asset, "holds other bytes than the asset (its digest differs)")
                }
                return nil
            }
            data.count = count
            data.withUnsafeBytes { state.hash.update($0) }
            state.offset += count
            return data
        }
    }
}
