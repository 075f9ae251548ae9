import Foundation
import MagicMirror
import MirrorTesting
import Testing

@Suite(.timeLimit(.minutes(5))) struct UUIDTextTests {
    private func parse(_ text: String) -> UUID? {
        Array(text.utf8).withUnsafeBufferPointer { UUIDText.parse($0) }
    }

    @Test func writesWhatFoundationWrites() {
        for _ in 0..<1_000 {
            let uuid = UUID()
            #expect(UUIDText.string(uuid) == uuid.uuidString)
        }
        let edge = UUID(uuid: (0, 0xFF, 0x0F, 0xF0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xA, 0xB, 0xC))
        #expect(UUIDText.string(edge) == edge.uuidString)
    }

    @Test func appendsWhatJSONEncoderWritesForAUUID() throws {
        var bytes: [UInt8] = Array("[".utf8)
        let uuids = (0..<100).map { _ in UUID() }
            + [UUID(uuid: (0, 0xFF, 0x0F, 0xF0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xA, 0xB, 0xC))]
        for (index, uuid) in uuids.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            UUIDText.appendQuoted(uuid, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        #expect(String(decoding: bytes, as: UTF8.self) == String(decoding: try JSONEncoder().encode(uuids), as: UTF8.self))
    }

    @Test func readsTheCanonicalFormInEitherCase() {
        for _ in 0..<1_000 {
            let uuid = UUID()
            #expect(parse(uuid.uuidString) == uuid)
            #expect(parse(uuid.uuidString.lowercased()) == uuid)
        }
    }

    @Test(arguments: [
        "", "E621E1F8-C36C-495A-93FC-0C247A3E6E5", "E621E1F8-C36C-495A-93FC-0C247A3E6E5FF",
        "E621E1F8C36C-495A-93FC-0C247A3E6E5F0", "G621E1F8-C36C-495A-93FC-0C247A3E6E5F",
        "E621E1F8-C36C-495A-93FC+0C247A3E6E5F", " 621E1F8-C36C-495A-93FC-0C247A3E6E5F",
    ])
    func refusesAnythingElse(text: String) {
        #expect(parse(text) == nil)
    }

    @Test func aRecordsIDIsItsUUIDString() {
        let sample = SampleRecord(title: "x")
        #expect(sample.recordID == sample.id.uuidString)
    }
}
