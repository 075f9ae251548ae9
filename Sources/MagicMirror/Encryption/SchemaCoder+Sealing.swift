import Foundation

// A mirror with a cipher stores its records sealed. Everything else a mirror does with
// stored fields (migrating, decoding, merging, keeping unknown fields) works on open fields:
// the schema coder opens stored fields as it reads them (`opened`), and the mirror seals
// what it commits (`sealed`), in `commitNextBatch`, conflict resolution and
// `migrateStoredRecords`.

extension SchemaCoder {
    /// Stored fields opened: the plaintext of sealed fields, open fields as they are.
    ///
    /// - Throws: A ``StoredRecordProblem`` when the fields are sealed and cannot be opened
    ///   (a wrong key, changed bytes, or a mirror without a cipher).
    package func opened(_ fields: Data) throws -> Data {
        do {
            guard let sealer else {
                guard let sealed = try FieldSealer.sealedValue(in: fields) else { return fields }
                throw SealProblem(
                    reason: "it is sealed with key \(String(reflecting: sealed.keyID)), and the mirror has no "
                        + "cipher to open it (MirrorConfiguration.cipher)",
                    underlying: nil)
            }
            return try sealer.open(fields)
        } catch let problem as SealProblem {
            throw StoredRecordProblem(
                field: nil, storedVersion: storedVersion(of: fields), currentVersion: currentVersion,
                recordType: "\(Record.self)", migration: nil, reason: problem.reason, underlying: problem.underlying)
        }
    }

    /// The stored fields a save replaces, opened.
    ///
    /// - Throws: A ``StoredRecordProblem`` that says nothing is overwritten, when they are
    ///   sealed and cannot be opened: the fields the type does not know could not be kept.
    func openedBase(_ fields: Data) throws -> Data {
        do {
            return try opened(fields)
        } catch var problem as StoredRecordProblem {
            problem.reason = "the stored record it would replace cannot be opened (\(problem.reason)), so nothing "
                + "is overwritten"
            throw problem
        }
    }

    /// Open fields in the form to store them: sealed when the mirror has a cipher.
    ///
    /// - Throws: What the cipher throws.
    package func sealed(_ fields: Data) throws -> Data {
        guard let sealer else { return fields }
        return try sealer.seal(fields)
    }

    /// Whether `migrateStoredRecords()` should store these fields again: sealed with an
    /// older key, or not sealed, while the mirror has a cipher.
    func needsSealing(_ fields: Data) -> Bool {
        sealer?.isOutdated(fields) ?? false
    }

    /// For a mirror without a cipher: the reason sealed fields do not decode, which says
    /// more than the decoding error of their envelope.
    func sealedProblem(_ fields: Data) -> (any Error)? {
        guard sealer == nil else { return nil }
        do {
            _ = try opened(fields)
            return nil
        } catch {
            return error
        }
    }
}
