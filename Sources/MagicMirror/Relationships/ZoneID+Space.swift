/// Scope spaces: the zones that references and delete rules connect.
extension ZoneID {
    /// The zone of `recordType` in this zone's scope space (the same scope and user).
    ///
    /// - Throws: ``MirrorError/Kind/invalidName`` for an invalid record type.
    package func sibling(_ recordType: String) throws(MirrorError) -> ZoneID {
        try ZoneID(recordType, scope: scope, user: user)
    }

    /// A key naming the zone's scope space: its scope and, for a private zone, its user.
    package var spaceKey: String {
        if let user { return "\(scope)/\(user)" }
        return "\(scope)"
    }
}
