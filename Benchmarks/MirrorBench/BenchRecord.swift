import Foundation
import MagicMirror

/// The record every workload stores: five fields, about 170 bytes of JSON.
struct BenchRecord: Recordable {
    var id: UUID
    var title: String
    var done: Bool
    var created: Date
    var number: Int

    static func make(_ index: Int) -> BenchRecord {
        BenchRecord(
            id: UUID(),
            title: "Benchmark record number \(index) with a title long enough to be realistic",
            done: index % 3 == 0,
            created: Date(timeIntervalSince1970: 1_763_700_000 + Double(index)),
            number: index)
    }

    static func makeMany(_ count: Int) -> [BenchRecord] { (0..<count).map(make) }
}
