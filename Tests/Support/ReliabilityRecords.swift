import MagicMirror

// The record types that the reliability subcommands of `mirror-worker` write and the
// Reliability* suites read back: one definition for both sides.

/// A record of the crash campaign: its payload has a random length and its checksum covers
/// the id and the payload, so a record that was only partly written cannot pass for whole.
public struct CrashRecord: Recordable {
    public var id: String
    public var writer: String
    public var n: Int
    public var payload: String
    public var check: String

    /// A record whose payload of `payloadLength` characters is drawn from the id, so that
    /// the same id always has the same payload.
    public init(id: String, writer: String, n: Int, payloadLength: Int) {
        self.id = id
        self.writer = writer
        self.n = n
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SplitMix64(seed: FNV1a.hash(id))
        payload = String((0..<payloadLength).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
        check = Self.checksum(id: id, payload: payload)
    }

    /// The checksum of a record's id and payload: the FNV-1a digest of `id|payload`.
    public static func checksum(id: String, payload: String) -> String {
        String(FNV1a.hash(id + "|" + payload), radix: 16)
    }

    /// Whether the checksum matches the id and payload.
    public var isWhole: Bool { check == Self.checksum(id: id, payload: payload) }
}

/// A record of the concurrency runs: each process owns one of `p0`…`p3` and shares `last`,
/// so a three-way merge by field keeps every process's own field.
public struct EditRecord: Recordable {
    public var id: String
    public var owner: String
    public var p0 = 0
    public var p1 = 0
    public var p2 = 0
    public var p3 = 0
    public var last = ""

    /// A record with every field at zero.
    public init(id: String, owner: String) {
        self.id = id
        self.owner = owner
    }

    /// The field of process `index` (0…3).
    public static func field(_ index: Int) -> WritableKeyPath<EditRecord, Int> {
        switch index {
        case 0: \.p0
        case 1: \.p1
        case 2: \.p2
        default: \.p3
        }
    }

    /// The value of process `index`'s field (0…3).
    public func field(_ index: Int) -> Int { self[keyPath: Self.field(index)] }
}
