import Foundation

/// Encodes an `Encodable` value straight to the UTF-8 bytes of a JSON object, giving byte
/// for byte what `StoredFieldsFormat`'s `JSONEncoder` (sorted keys, default strategies)
/// gives, or declining.
///
/// Saving records encodes each one. `JSONEncoder` builds a tree of boxed values for every
/// record, a new encoder object for every nested value and a dictionary for every object,
/// then serializes the tree; for records of a few fields that fixed cost is most of its
/// time. This encoder keeps one growing scratch buffer per document: a scalar is written
/// as JSON text where it is encoded, an object keeps its members as (key, byte range)
/// pairs, and the document is written once, each object's keys sorted, at the end.
///
/// It never gives bytes `JSONEncoder` would not give. Wherever it cannot be sure of that,
/// it *declines* (throws ``Declined``), and the caller encodes the value with
/// `JSONEncoder`, which gives the bytes or the error to report. It declines on:
///
/// - anything that throws while encoding (a non-conforming float such as `.nan`, an error
///   a type's `encode(to:)` throws), so errors always come from `JSONEncoder`;
/// - object keys that are not ASCII (`JSONEncoder` keeps an object's members in a
///   dictionary keyed by `String`, where canonically equivalent keys are one key, and
///   sorts them by `String` order; for ASCII keys both are plain byte order) and keys
///   encoded twice in one object;
/// - `Decimal`, `Int128`/`UInt128`, `superEncoder()`, a container asked for where a value
///   of another kind was already encoded, a single value encoded twice, nesting deeper
///   than ``maximumDepth``;
/// - a value that is not an object at the top;
/// - Apple platforms, where Foundation's `JSONEncoder` is another implementation whose key
///   order (it compares keys with its own string comparison) is not checked here: there
///   it always declines (``standsInOnThisPlatform``).
///
/// Like `JSONEncoder` it writes `Date` as seconds since 2001, `Data` as Base64, `URL` as
/// its `absoluteString`, floats as their shortest `description` without a trailing `.0`,
/// and escapes `"`, `\`, `/` and control characters the same way.
package enum DirectJSONEncoder {
    /// Thrown when the encoder cannot be sure to give `JSONEncoder`'s bytes.
    package struct Declined: Error {}

    /// How many objects' key orders an encoder keeps for the next objects with the same
    /// keys: enough for a record type with a few nested types.
    package static let keyOrdersKept = 8

    /// The deepest nesting encoded (containers within containers), below `JSONEncoder`'s
    /// own limit.
    package static let maximumDepth = 200

    /// Whether this platform's `JSONEncoder` is the one whose bytes this encoder reproduces
    /// (swift-foundation's, sorting keys by `String` order); not on Apple platforms.
    package static var standsInOnThisPlatform: Bool {
        #if canImport(Darwin)
        return false
        #else
        return true
        #endif
    }

    /// Whether `encoder` encodes exactly as this one: sorted keys and nothing else in its
    /// output formatting, default strategies, no user info.
    package static func canStandIn(for encoder: JSONEncoder) -> Bool {
        guard standsInOnThisPlatform,
              encoder.outputFormatting == [.sortedKeys],
              case .deferredToDate = encoder.dateEncodingStrategy,
              case .base64 = encoder.dataEncodingStrategy,
              case .throw = encoder.nonConformingFloatEncodingStrategy,
              case .useDefaultKeys = encoder.keyEncodingStrategy
        else { return false }
        return encoder.userInfo.isEmpty
    }

    /// The JSON object `value` encodes to, byte for byte as a `JSONEncoder` that
    /// ``canStandIn(for:)`` would give it.
    ///
    /// - Throws: ``Declined`` when it cannot give `JSONEncoder`'s bytes: encode with
    ///   `JSONEncoder` then.
    package static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        try DirectJSONWriter().encodeDocument(value)
    }

    /// `value` encoded by this encoder when it can stand in for `encoder` and does not
    /// decline, else by `encoder`.
    ///
    /// - Parameter direct: Whether this encoder may stand in (``canStandIn(for:)``, asked
    ///   once by a caller that keeps `encoder`).
    /// - Throws: `encoder`'s error when `value` does not encode.
    package static func encode<Value: Encodable>(
        _ value: Value, direct: Bool, orWith encoder: JSONEncoder
    ) throws -> Data {
        if direct, let data = try? encode(value) { return data }
        return try encoder.encode(value)
    }

    /// Encodes many values one after the other, reusing its buffers: one per thread.
    package struct Batch {
        private let writer = DirectJSONWriter()

        package init() {}

        /// ``DirectJSONEncoder/encode(_:)`` with this batch's buffers.
        ///
        /// - Throws: ``Declined`` when it cannot give `JSONEncoder`'s bytes.
        package func encode<Value: Encodable>(_ value: Value) throws -> Data {
            try writer.encodeDocument(value)
        }

        /// ``DirectJSONEncoder/encode(_:)``, appending the bytes to `output` (left as it
        /// was when it declines).
        ///
        /// - Throws: ``Declined`` when it cannot give `JSONEncoder`'s bytes.
        package func encode<Value: Encodable>(_ value: Value, appendingTo output: inout JSONByteWriter) throws {
            try writer.encodeDocument(value, appendingTo: &output)
        }
    }
}
