import MagicMirror
import Testing

/// `ZoneID.private` and `.shared` take a `MirrorUser`, as every other API does (issue #36,
/// point 7); the `String` forms name the same zones.
@Suite(.timeLimit(.minutes(5))) struct ZoneIDUserTests {
    @Test func aMirrorUserNamesTheSameZoneAsItsName() throws {
        let alice = try MirrorUser(name: "alice")
        #expect(ZoneID.private("Note", user: alice) == ZoneID.private("Note", user: "alice"))
        #expect(ZoneID.shared("Note", user: alice) == ZoneID.shared("Note", user: "alice"))
        #expect(ZoneID.private("Note", user: alice).user == "alice")
        #expect(ZoneID.private("Note", user: alice).scope == .private)
        #expect(ZoneID.shared("Note", user: alice).scope == .shared)
        #expect("\(ZoneID.shared("Note", user: alice))" == "shared/alice/Note")
    }
}
