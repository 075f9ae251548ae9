import Foundation

/// How a ``Recordable`` value becomes the fields of a stored record and back: one definition
/// shared by ``Mirror`` and by MirrorTesting's simulated writers and typed inspection, so
/// that what a test stores is byte for byte what a mirror would store.
///
/// Fields are a JSON object encoded with sorted keys and `JSONEncoder`'s default
/// strategies (dates as seconds since 2001, data as Base64), so that they decode back to
/// equal values.
package enum StoredFieldsFormat {
    /// A new encoder for record fields.
    package static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// A new decoder for record fields.
    package static func makeDecoder() -> JSONDecoder {
        JSONDecoder()
    }
}
