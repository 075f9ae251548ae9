import Dispatch
import Foundation
import Synchronization

/// Delete rules in the JSON-file database (see <doc:Relationships> and <doc:JSONFileFormat>).
extension JSONFileDatabase: RelationshipDatabase {
    /// Stores the delete rules of `referringType` in the scope space of `zone`, replacing the
    /// type's earlier rules there, in `relationships/<scope>/rules.ndjson` (durably, under the
    /// space's lock); nothing is written when they did not change.
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` or ``MirrorError/Kind/invalidRecord`` for a
    ///   rule that is not valid; an I/O kind when the file cannot be written. Nothing is
    ///   stored then.
    public func registerDeleteRules(
        _ rules: [StoredDeleteRule], referringType: String, in zone: ZoneID
    ) async throws {
        try zone.validate()
        try DeleteRuleSet.check(rules, referringType: referringType)
        let engine = self.engine
        let space = engine.relationships.space(of: zone, rootPath: engine.context.rootPath)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                do throws(MirrorError) {
                    try space.state.withLock { state throws(MirrorError) in
                        try space.register(rules, referringType: referringType, &state, context: engine.context)
                    }
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// The delete rules stored for the scope space of `zone`, as read from its rules file.
    ///
    /// - Throws: A ``MirrorError`` when the file cannot be read.
    package func deleteRules(in zone: ZoneID) throws -> [StoredDeleteRule] {
        let space = engine.relationships.space(of: zone, rootPath: engine.context.rootPath)
        return try space.state.withLock { state throws(MirrorError) in
            try space.rules(&state, context: engine.context)
        }
    }
}
