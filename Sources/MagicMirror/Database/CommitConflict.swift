import Foundation

/// A commit that was refused because some of its operations conflicted.
package struct CommitConflict: Error, Sendable {
    /// The outcome to return to the caller.
    package var outcome: CommitOutcome
}
