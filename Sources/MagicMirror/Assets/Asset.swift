import Foundation

/// A file that a record carries: an image, a PDF, a video, of any size.
///
/// Store the file first, then put the returned `Asset` in a field of a record:
///
/// ```swift
/// struct Photo: Recordable {
///     var id = UUID()
///     var caption: String
///     var image: Asset
/// }
///
/// let image = try await photos.storeAsset(contentsOf: pictureURL)
/// photos.dataModel.append(Photo(caption: "Harbour", image: image))
/// ```
///
/// An asset is named by its content: the SHA-256 ``digest`` of its bytes. Its file is kept
/// beside the records of its zone, written and flushed before ``Mirror/storeAsset(contentsOf:)``
/// returns, so a record can never be committed before the file it refers to. Storing the
/// same bytes twice keeps one file. A file no record refers to any more is removed by
/// ``Mirror/removeUnreferencedAssets()``. See <doc:Assets>.
///
/// In a record's JSON an asset is an object with the key `"$asset"` (the digest) and its
/// ``size``: `{"$asset":"9f86d0…","size":4}`. Decoding checks the digest, so a record
/// whose asset value names anything but a digest (a path, for example) fails to decode
/// (``MirrorError/Kind/decodingFailed``) and can never make MagicMirror read or remove
/// another file.
public struct Asset: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The SHA-256 digest of the asset's bytes, as 64 lowercase hexadecimal digits.
    public let digest: String
    /// The asset's size in bytes.
    public let size: Int

    /// An asset known to be valid (made by a store, or by decoding, which validates).
    package init(validDigest digest: String, size: Int) {
        self.digest = digest
        self.size = size
    }

    /// The key of an asset's digest in a record's JSON.
    package static let digestKey = "$asset"

    /// Whether `text` is a digest: 64 lowercase hexadecimal digits.
    package static func isDigest(_ text: String) -> Bool {
        let utf8 = text.utf8
        return utf8.count == 64 && utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private enum CodingKeys: String, CodingKey {
        case digest = "$asset"
        case size
    }

    /// Decodes an asset, checking that its digest is a SHA-256 digest and its size is not
    /// negative.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for anything else.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let digest = try container.decode(String.self, forKey: .digest)
        guard Self.isDigest(digest) else {
            let shown = digest.count > 80 ? String(digest.prefix(80)) + "…" : digest
            throw DecodingError.dataCorruptedError(
                forKey: .digest, in: container,
                debugDescription: "\(String(reflecting: shown)) is not an asset digest "
                    + "(64 lowercase hexadecimal digits)")
        }
        let size = try container.decode(Int.self, forKey: .size)
        guard size >= 0 else {
            throw DecodingError.dataCorruptedError(
                forKey: .size, in: container, debugDescription: "an asset's size cannot be negative (\(size))")
        }
        self.init(validDigest: digest, size: size)
    }

    /// Encodes the asset as `{"$asset": digest, "size": size}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(digest, forKey: .digest)
        try container.encode(size, forKey: .size)
    }

    public var description: String { "Asset(\(digest.prefix(12))…, \(size) bytes)" }
}
