import Foundation

/// Processor time from `/proc`, in seconds: to tell who used the machine during a workload.
enum ProcessorTime {
    /// The user and system time of process `id` (a pid, or `self`).
    static func process(_ id: String) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(id)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state (field 3), …, utime (14), stime (15).
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }

    /// The time the machine's processors ran anything (user, nice, system, interrupts),
    /// summed over processors.
    static func machine() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        // user nice system idle iowait irq softirq …
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 7 else { return nil }
        return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / ticksPerSecond
    }

    private static var ticksPerSecond: Double { Double(sysconf(Int32(_SC_CLK_TCK))) }
}

/// The processor time the relay, PostgreSQL's sessions on its database, this process and
/// the whole machine use from `init` on.
struct ProcessorUse {
    /// Seconds of processor time.
    struct Used {
        var relay: Double?
        /// The sessions that were open at the start.
        var server: Double
        var bench: Double?
        var machine: Double?
    }

    private let relay: BenchRelay
    private let start: (relay: Double?, bench: Double?, machine: Double?)
    private let backends: [Int: Double]

    /// Starts counting, for the relay and the server's sessions `backends` (process ids).
    init(relay: BenchRelay, backends: [Int]) {
        self.relay = relay
        self.backends = Dictionary(uniqueKeysWithValues: backends.compactMap { pid in
            ProcessorTime.process("\(pid)").map { (pid, $0) }
        })
        start = (relay.cpuSeconds, ProcessorTime.process("self"), ProcessorTime.machine())
    }

    /// What each used since `init`.
    func sinceStart() -> Used {
        func since(_ now: Double?, _ then: Double?) -> Double? { now.flatMap { now in then.map { now - $0 } } }
        return Used(
            relay: since(relay.cpuSeconds, start.relay),
            server: backends.reduce(0) { $0 + (since(ProcessorTime.process("\($1.key)"), $1.value) ?? 0) },
            bench: since(ProcessorTime.process("self"), start.bench),
            machine: since(ProcessorTime.machine(), start.machine))
    }
}
