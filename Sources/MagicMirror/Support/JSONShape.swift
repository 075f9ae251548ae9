import Foundation

/// Cheap checks of the shape of JSON bytes.
package enum JSONShape {
    /// Whether `data` is one JSON object (leading and trailing white space allowed), in
    /// strict JSON: a value like `{"a":1} {"b":2}` or `{"a":` is refused.
    ///
    /// One pass of ``JSONScanner``, which validates without building anything.
    package static func isObject(_ data: Data) -> Bool {
        JSONScanner.isSingleObject(data)
    }
}
