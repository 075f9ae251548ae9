import Foundation

/// The `Encoder` behind ``DirectJSONEncoder``: one per document, shared by every nested
/// value (its coding path is a stack), writing into one scratch buffer.
final class DirectJSONWriter: Encoder {
    /// Where a value's JSON lies, once encoded.
    enum Slot {
        /// Nothing encoded yet (a value that encodes nothing is `{}`, as in `JSONEncoder`).
        case pending
        /// JSON text in `scratch`, from `start` to one past its last byte.
        case text(start: Int, end: Int)
        /// An object: its members are `objects[index]`.
        case object(Int)
        /// An array: its elements are `arrays[index]`.
        case array(Int)
    }

    /// One member of an object: its key and where its value lies.
    struct Member {
        var key: String
        var value: Slot
    }

    /// The writer's mutable state. It lives behind a pointer, not in stored properties:
    /// a class's stored properties are checked for exclusive access at run time on every
    /// access, which was an eighth of encoding a record. One writer is only ever used by one
    /// thread at a time (one per document, or one per batch part), and no two accesses to
    /// one field overlap.
    private struct State {
        var scratch: [UInt8] = []
        /// The members of each object of the document, `objects[0..<objectCount]`; the
        /// arrays past that are kept, emptied, for the next document.
        var objects: [[Member]] = []
        var objectCount = 0
        /// The elements of each array, `arrays[0..<arrayCount]`, likewise.
        var arrays: [[Slot]] = []
        var arrayCount = 0
        /// The document written.
        var output = JSONByteWriter(capacity: 256)
        /// The slot the value being encoded fills.
        var current = Slot.pending
        /// Set when a requirement that cannot throw (asking for a container) could not be
        /// met as `JSONEncoder` would meet it: the document is then declined.
        var mustDecline = false
        /// Set when the document is written: a container kept past it declines.
        var isFinished = false
        /// Counts the documents encoded: a container kept from an earlier one declines.
        var document = 0
        var depth = 0
        var codingPath: [any CodingKey] = []
        /// The key orders of the last objects written (see ``KeyOrder``), at most
        /// ``DirectJSONEncoder/keyOrdersKept``.
        var keyOrders: [KeyOrder] = []
    }

    /// The order an object's members are written in (sorted by key) and their keys
    /// quoted, kept for the next objects with the same keys in the same order: a batch
    /// encodes values of one type, whose objects have the same keys every time, and sorting
    /// and quoting them was two fifths of writing a record.
    struct KeyOrder {
        /// The keys in the order they were encoded.
        var keys: [String]
        /// The positions of the members in the order they are written.
        var order: [Int]
        /// The quoted keys, in the order they are written, followed by `:` each.
        var quoted: [UInt8]
        /// Where each quoted key (with its `:`) ends in `quoted`.
        var ends: [Int]
    }

    private let state: UnsafeMutablePointer<State>

    var scratch: [UInt8] {
        get { state.pointee.scratch }
        _modify { yield &state.pointee.scratch }
    }
    var objects: [[Member]] {
        get { state.pointee.objects }
        _modify { yield &state.pointee.objects }
    }
    private var objectCount: Int {
        get { state.pointee.objectCount }
        _modify { yield &state.pointee.objectCount }
    }
    var arrays: [[Slot]] {
        get { state.pointee.arrays }
        _modify { yield &state.pointee.arrays }
    }
    private var arrayCount: Int {
        get { state.pointee.arrayCount }
        _modify { yield &state.pointee.arrayCount }
    }
    private var output: JSONByteWriter {
        get { state.pointee.output }
        _modify { yield &state.pointee.output }
    }
    var current: Slot {
        get { state.pointee.current }
        _modify { yield &state.pointee.current }
    }
    private(set) var mustDecline: Bool {
        get { state.pointee.mustDecline }
        _modify { yield &state.pointee.mustDecline }
    }
    private var isFinished: Bool {
        get { state.pointee.isFinished }
        _modify { yield &state.pointee.isFinished }
    }
    private var keyOrders: [KeyOrder] {
        get { state.pointee.keyOrders }
        _modify { yield &state.pointee.keyOrders }
    }
    private(set) var document: Int {
        get { state.pointee.document }
        _modify { yield &state.pointee.document }
    }
    private var depth: Int {
        get { state.pointee.depth }
        _modify { yield &state.pointee.depth }
    }

    var codingPath: [any CodingKey] {
        get { state.pointee.codingPath }
        _modify { yield &state.pointee.codingPath }
    }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init() {
        state = .allocate(capacity: 1)
        state.initialize(to: State())
        state.pointee.scratch.reserveCapacity(256)
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Encodes `value`, which must encode an object, and returns its bytes. A writer
    /// encodes one document after the other, keeping its buffers.
    func encodeDocument<Value: Encodable>(_ value: Value) throws -> Data {
        output.removeAll()
        try encodeDocument(value, appendingTo: &output)
        return Data(output.bytes)
    }

    /// Encodes `value`, which must encode an object, and appends its bytes to `output`;
    /// when it declines, `output` is left as it was.
    func encodeDocument<Value: Encodable>(_ value: Value, appendingTo output: inout JSONByteWriter) throws {
        scratch.removeAll(keepingCapacity: true)
        objectCount = 0
        arrayCount = 0
        mustDecline = false
        isFinished = false
        document += 1
        depth = 0
        codingPath = []
        current = .pending
        defer { isFinished = true }
        let slot = try encodeNested(value)
        guard case .object = slot, !mustDecline else { throw DirectJSONEncoder.Declined() }
        let start = output.count
        do {
            try write(slot, to: &output)
        } catch {
            output.bytes.removeSubrange(start...)
            throw error
        }
    }

    func decline() { mustDecline = true }

    /// Marks the document declined and returns the error to throw: a type's `encode(to:)`
    /// that catches it cannot make the document go through.
    func declined() -> DirectJSONEncoder.Declined {
        mustDecline = true
        return DirectJSONEncoder.Declined()
    }

    func checkUsable() throws {
        guard !isFinished, !mustDecline else { throw declined() }
    }

    /// Throws unless a container made for `document` may still add to it.
    func checkUsable(for document: Int) throws {
        guard document == self.document else { throw declined() }
        try checkUsable()
    }

    // MARK: Values

    /// Encodes a value of any type and returns where it lies; `key`, when given, is pushed
    /// on the coding path while it encodes.
    func encodeNested<Value: Encodable>(_ value: Value, key: (any CodingKey)? = nil) throws -> Slot {
        try checkUsable()
        if Value.self == Date.self {
            return try text { try DirectJSONText.appendFloat((value as! Date).timeIntervalSinceReferenceDate, to: &$0) }
        }
        if Value.self == Data.self {
            return try text { DirectJSONText.appendEscaped((value as! Data).base64EncodedString(), to: &$0) }
        }
        if Value.self == UUID.self {
            // What UUID's own encode(to:) writes (its uuidString), without printf.
            return try text { UUIDText.appendQuoted(value as! UUID, to: &$0) }
        }
        if Value.self == URL.self {
            return try text { DirectJSONText.appendEscaped((value as! URL).absoluteString, to: &$0) }
        }
        if Value.self == Decimal.self { throw declined() }
        guard depth < DirectJSONEncoder.maximumDepth else { throw declined() }
        let saved = current
        depth += 1
        if let key { codingPath.append(key) }
        current = .pending
        defer {
            current = saved
            depth -= 1
            if key != nil { codingPath.removeLast() }
        }
        try value.encode(to: self)
        return current
    }

    /// Writes JSON text with `body` and returns where it lies.
    func text(_ body: (inout [UInt8]) throws -> Void) throws -> Slot {
        let start = scratch.count
        do {
            try body(&scratch)
        } catch {
            throw declined()
        }
        return .text(start: start, end: scratch.count)
    }

    func newObject() -> Int {
        if objectCount < objects.count {
            objects[objectCount].removeAll(keepingCapacity: true)
        } else {
            var members: [Member] = []
            members.reserveCapacity(8)
            objects.append(members)
        }
        objectCount += 1
        return objectCount - 1
    }

    func newArray() -> Int {
        if arrayCount < arrays.count {
            arrays[arrayCount].removeAll(keepingCapacity: true)
        } else {
            arrays.append([])
        }
        arrayCount += 1
        return arrayCount - 1
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let index: Int
        switch current {
        case .pending:
            index = newObject()
            current = .object(index)
        case .object(let existing):
            index = existing
        default:
            decline()
            index = newObject()
        }
        return KeyedEncodingContainer(DirectKeyedEncodingContainer<Key>(
            writer: self, document: document, object: index, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let index: Int
        switch current {
        case .pending:
            index = newArray()
            current = .array(index)
        case .array(let existing):
            index = existing
        default:
            decline()
            index = newArray()
        }
        return DirectUnkeyedEncodingContainer(writer: self, document: document, array: index, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        DirectSingleValueEncodingContainer(writer: self, codingPath: codingPath)
    }

    // MARK: Writing

    /// Writes the value at `slot` to `output`, each object's members sorted by key.
    func write(_ slot: Slot, to output: inout JSONByteWriter) throws {
        switch slot {
        case .pending:
            output.append("{}")
        case .text(let start, let end):
            scratch.withUnsafeBufferPointer { buffer in
                output.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<end]))
            }
        case .object(let index):
            // A copy: writing a nested object may change the kept key orders.
            let keys = try keyOrder(of: index)
            output.append(byte: UInt8(ascii: "{"))
            var start = 0
            for (written, position) in keys.order.enumerated() {
                if written > 0 { output.append(byte: UInt8(ascii: ",")) }
                let end = keys.ends[written]
                keys.quoted.withUnsafeBufferPointer { quoted in
                    output.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: quoted[start..<end]))
                }
                start = end
                try write(objects[index][position].value, to: &output)
            }
            output.append(byte: UInt8(ascii: "}"))
        case .array(let index):
            output.append(byte: UInt8(ascii: "["))
            for position in 0..<arrays[index].count {
                if position > 0 { output.append(byte: UInt8(ascii: ",")) }
                try write(arrays[index][position], to: &output)
            }
            output.append(byte: UInt8(ascii: "]"))
        }
    }

    /// The key order of object `index`: one kept, when its keys are those of an object
    /// written before, in the same order; else a new one, kept.
    ///
    /// - Throws: ``DirectJSONEncoder/Declined`` when a key is there twice.
    private func keyOrder(of index: Int) throws -> KeyOrder {
        let count = objects[index].count
        for keyOrder in keyOrders where keyOrder.keys.count == count {
            // Keys are ASCII (others decline), so `==` compares their bytes.
            if (0..<count).allSatisfy({ keyOrder.keys[$0] == objects[index][$0].key }) { return keyOrder }
        }
        let keys = objects[index].map(\.key)
        let order = keys.indices.sorted { keys[$0] < keys[$1] }
        var quoted: [UInt8] = []
        var ends: [Int] = []
        for (written, position) in order.enumerated() {
            if written > 0, keys[order[written - 1]] == keys[position] { throw DirectJSONEncoder.Declined() }
            DirectJSONText.appendEscaped(keys[position], to: &quoted)
            quoted.append(UInt8(ascii: ":"))
            ends.append(quoted.count)
        }
        if keyOrders.count == DirectJSONEncoder.keyOrdersKept { keyOrders.removeFirst() }
        let keyOrder = KeyOrder(keys: keys, order: order, quoted: quoted, ends: ends)
        keyOrders.append(keyOrder)
        return keyOrder
    }

    /// Whether every byte of `key` is ASCII (see ``DirectJSONEncoder`` for why others
    /// decline).
    static func isASCII(_ key: String) -> Bool {
        var key = key
        return key.withUTF8 { bytes in bytes.allSatisfy { $0 < 0x80 } }
    }
}
