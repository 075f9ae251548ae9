import Foundation

/// A quick check, without allocating, that saving some fields over stored ones loses no
/// stored field: the common case of a save, which then needs no further work.
enum StoredKeys {
    /// Whether every top-level key of the object `stored` is also a key of the object
    /// `written`, written the same way.
    ///
    /// Both are walked side by side, which assumes keys in the same sorted order (as a
    /// mirror writes them). When that does not hold, or either is not a well-formed object,
    /// the answer is `false`: never a wrong `true`, only the slower, exact path.
    static func areCovered(_ stored: Data, by written: Data) -> Bool {
        stored.withUnsafeBytes { storedRaw in
            written.withUnsafeBytes { writtenRaw in
                guard let storedBase = storedRaw.baseAddress?.assumingMemoryBound(to: UInt8.self),
                      let writtenBase = writtenRaw.baseAddress?.assumingMemoryBound(to: UInt8.self)
                else { return false }
                var storedKeys = KeyWalker(JSONScanner(base: storedBase, count: storedRaw.count))
                var writtenKeys = KeyWalker(JSONScanner(base: writtenBase, count: writtenRaw.count))
                var candidate = writtenKeys.next()
                while true {
                    switch storedKeys.next() {
                    case .failed:
                        return false
                    case .end:
                        return true
                    case .key(let start, let end):
                        while case .key(let otherStart, let otherEnd) = candidate,
                              compare(writtenBase, otherStart, otherEnd, storedBase, start, end) < 0 {
                            candidate = writtenKeys.next()
                        }
                        guard case .key(let otherStart, let otherEnd) = candidate,
                              compare(writtenBase, otherStart, otherEnd, storedBase, start, end) == 0
                        else { return false }
                        candidate = writtenKeys.next()
                    }
                }
            }
        }
    }

    /// Compares two byte ranges lexicographically.
    private static func compare(
        _ a: UnsafePointer<UInt8>, _ aStart: Int, _ aEnd: Int,
        _ b: UnsafePointer<UInt8>, _ bStart: Int, _ bEnd: Int
    ) -> Int {
        let count = min(aEnd - aStart, bEnd - bStart)
        let order = memcmp(a + aStart, b + bStart, count)
        if order != 0 { return Int(order) }
        return (aEnd - aStart) - (bEnd - bStart)
    }

    /// The keys of one object, in the order written.
    private struct KeyWalker {
        enum Step { case key(start: Int, end: Int), end, failed }

        var scanner: JSONScanner
        var started = false

        init(_ scanner: JSONScanner) { self.scanner = scanner }

        mutating func next() -> Step {
            scanner.skipWhitespace()
            if !started {
                started = true
                guard scanner.consume(UInt8(ascii: "{")) else { return .failed }
                scanner.skipWhitespace()
                if scanner.consume(UInt8(ascii: "}")) { return .end }
            } else {
                if scanner.consume(UInt8(ascii: "}")) { return .end }
                guard scanner.consume(UInt8(ascii: ",")) else { return .failed }
                scanner.skipWhitespace()
            }
            guard let key = scanner.scanString() else { return .failed }
            scanner.skipWhitespace()
            guard scanner.consume(UInt8(ascii: ":")) else { return .failed }
            scanner.skipWhitespace()
            guard scanner.skipValue() else { return .failed }
            return .key(start: key.start, end: key.end)
        }
    }
}
