import Foundation

/// Finds the assets a record's fields refer to: every JSON object, at any depth, with the
/// key `"$asset"` (see ``Asset``).
package enum AssetReferences {
    /// The bytes `"$asset"`: fields without them refer to no asset and are not parsed.
    private static let marker = Array("\"\(Asset.digestKey)\"".utf8)

    /// The digests `fields` refers to, added to `digests`.
    ///
    /// - Returns: The first `"$asset"` value that is not a digest, described for a message,
    ///   or `nil` when there is none.
    @discardableResult
    package static func collect(in fields: Data, into digests: inout Set<String>) -> String? {
        guard mayRefer(fields),
              let object = try? JSONSerialization.jsonObject(with: fields, options: [.fragmentsAllowed])
        else { return nil }
        var invalid: String?
        walk(object, into: &digests, invalid: &invalid)
        return invalid
    }

    /// The digests the saves of `operations` refer to.
    ///
    /// - Throws: ``MirrorError/Kind/invalidRecord`` when a `"$asset"` value is not a digest.
    ///
    /// A large commit is looked through in parallel parts (one per core); the error is the
    /// one of the first operation in order that has one, as when looked through in order.
    package static func digests(in operations: [RecordOperation]) throws(MirrorError) -> Set<String> {
        let parts = BatchJSONCoding.inParallelRanges(operations.count) { range -> Result<Set<String>, MirrorError> in
            var digests = Set<String>()
            for operation in operations[range] {
                guard case .save(let fields) = operation.action else { continue }
                if let invalid = collect(in: fields, into: &digests) {
                    return .failure(MirrorError(
                        .invalidRecord,
                        "record \(operation.recordID) refers to the asset \(invalid), which is not an asset "
                            + "digest (64 lowercase hexadecimal digits); the key \"\(Asset.digestKey)\" is "
                            + "reserved for assets. Nothing was stored.",
                        recordIDs: [operation.recordID]))
                }
            }
            return .success(digests)
        }
        var digests = Set<String>()
        for part in parts { digests.formUnion(try part.get()) }
        return digests
    }

    /// Whether the bytes contain `"$asset"` (a cheap test before parsing): `memchr` finds
    /// each `$`, which most fields do not have at all (a byte-wise scan of every record's
    /// fields was a tenth of a large commit's checks).
    private static func mayRefer(_ fields: Data) -> Bool {
        fields.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Bool in
            marker.withUnsafeBytes { (marker: UnsafeRawBufferPointer) -> Bool in
                guard let base = raw.baseAddress, raw.count >= marker.count else { return false }
                // The `$` is the marker's second byte: one must stand before it.
                var offset = 1
                while offset < raw.count {
                    guard let found = memchr(base + offset, Int32(UInt8(ascii: "$")), raw.count - offset) else {
                        return false
                    }
                    let start = base.distance(to: UnsafeRawPointer(found)) - 1
                    if raw.count - start >= marker.count, memcmp(base + start, marker.baseAddress!, marker.count) == 0 {
                        return true
                    }
                    offset = start + 2
                }
                return false
            }
        }
    }

    private static func walk(_ value: Any, into digests: inout Set<String>, invalid: inout String?) {
        if let object = value as? [String: Any] {
            if let reference = object[Asset.digestKey] {
                if let digest = reference as? String, Asset.isDigest(digest) {
                    digests.insert(digest)
                } else if invalid == nil {
                    let text = String(describing: reference)
                    invalid = String(reflecting: text.count > 80 ? String(text.prefix(80)) + "…" : text)
                }
            }
            for child in object.values { walk(child, into: &digests, invalid: &invalid) }
        } else if let array = value as? [Any] {
            for child in array { walk(child, into: &digests, invalid: &invalid) }
        }
    }
}
