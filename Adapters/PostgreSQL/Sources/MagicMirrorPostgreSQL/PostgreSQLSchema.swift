import Logging
import MagicMirror
import PostgresNIO

/// The tables, policies and grants of the `magicmirror` schema, versioned, and the
/// migration that brings a database up to date.
///
/// A migration runs in one transaction under an advisory lock, so processes that open the
/// same database at once wait for each other and the schema is never half made. The
/// version lives in `magicmirror.meta`; a database whose schema is newer than this code
/// knows is refused with ``MirrorError/Kind/unsupportedFormat`` rather than written to.
/// The article "Running on PostgreSQL" documents each table.
enum PostgreSQLSchema {
    /// The version this code writes and reads.
    static let currentVersion = 10

    /// The steps that bring a schema from version `n - 1` to `n`, in order; step 0 makes
    /// version 1 from nothing. A later version appends a step; none is ever edited.
    static let migrations: [[PostgresQuery]] = [
        [
            "CREATE SCHEMA IF NOT EXISTS magicmirror",
            """
            CREATE TABLE magicmirror.meta (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                schema_version integer NOT NULL,
                identifier text NOT NULL,
                base_generation bigint NOT NULL)
            """,
            """
            INSERT INTO magicmirror.meta (schema_version, identifier, base_generation)
            VALUES (1, gen_random_uuid()::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
            """,
            "CREATE SEQUENCE magicmirror.change_seq",
            """
            CREATE TABLE magicmirror.zones (
                zone_id bigserial PRIMARY KEY,
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                generation bigint NOT NULL,
                base_seq bigint NOT NULL DEFAULT 0,
                last_seq bigint NOT NULL DEFAULT 0,
                UNIQUE (scope, owner, record_type),
                CHECK ((scope = 'public' AND owner = '') OR (scope = 'private' AND owner <> '')))
            """,
            """
            CREATE TABLE magicmirror.records (
                zone_id bigint NOT NULL REFERENCES magicmirror.zones,
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                version bigint NOT NULL,
                fields bytea,
                modified_millis bigint NOT NULL,
                modified_counter bigint NOT NULL,
                writer text NOT NULL,
                seq bigint NOT NULL,
                PRIMARY KEY (zone_id, id))
            """,
            "CREATE INDEX records_by_seq ON magicmirror.records (zone_id, seq)",
            "ALTER TABLE magicmirror.zones ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE magicmirror.records ENABLE ROW LEVEL SECURITY",
            """
            CREATE POLICY scope_owner ON magicmirror.zones
                USING (scope = 'public' OR owner = current_user::text)
                WITH CHECK (scope = 'public' OR owner = current_user::text)
            """,
            """
            CREATE POLICY scope_owner ON magicmirror.records
                USING (scope = 'public' OR owner = current_user::text)
                WITH CHECK (scope = 'public' OR owner = current_user::text)
            """,
            "GRANT USAGE ON SCHEMA magicmirror TO PUBLIC",
            "GRANT SELECT ON magicmirror.meta TO PUBLIC",
            "GRANT SELECT, INSERT, UPDATE ON magicmirror.zones, magicmirror.records TO PUBLIC",
            "GRANT USAGE ON SEQUENCE magicmirror.change_seq, magicmirror.zones_zone_id_seq TO PUBLIC",
        ],
        // Version 2: each record's creation clock (`StoredRecord.created`). A record stored
        // by version 1 gets the clock of its last change, since its creation clock was not
        // kept (exact for records never edited since).
        [
            """
            ALTER TABLE magicmirror.records
                ADD COLUMN created_millis bigint, ADD COLUMN created_counter bigint
            """,
            """
            UPDATE magicmirror.records
            SET created_millis = modified_millis, created_counter = modified_counter
            """,
            """
            ALTER TABLE magicmirror.records
                ALTER COLUMN created_millis SET NOT NULL, ALTER COLUMN created_counter SET NOT NULL
            """,
        ],
        // Version 3: assets (see PostgreSQLDatabase+Assets.swift). An asset's bytes are chunks
        // of `asset_chunks` under one `content` number; `assets` names them by zone and
        // digest, written last, so an asset is there whole or not at all; `asset_holds` keeps
        // an asset stored by a live writer from collection until a record refers to it.
        // `zones.assets_epoch` moves when a collection removes assets, so a commit that read
        // its zone before cannot refer to one it removed.
        [
            "ALTER TABLE magicmirror.zones ADD COLUMN assets_epoch bigint NOT NULL DEFAULT 0",
            "CREATE SEQUENCE magicmirror.asset_content_seq",
            """
            CREATE TABLE magicmirror.assets (
                zone_id bigint NOT NULL REFERENCES magicmirror.zones,
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                digest text COLLATE "C" NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
                size bigint NOT NULL CHECK (size >= 0),
                content bigint NOT NULL UNIQUE,
                PRIMARY KEY (zone_id, digest))
            """,
            """
            CREATE TABLE magicmirror.asset_chunks (
                content bigint NOT NULL,
                n integer NOT NULL,
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                data bytea NOT NULL,
                PRIMARY KEY (content, n))
            """,
            // Stored as they come: most assets (images, video) do not compress.
            "ALTER TABLE magicmirror.asset_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
            """
            CREATE TABLE magicmirror.asset_holds (
                zone_id bigint NOT NULL REFERENCES magicmirror.zones,
                digest text COLLATE "C" NOT NULL,
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                writer text NOT NULL,
                lock_key integer NOT NULL,
                PRIMARY KEY (zone_id, digest, writer))
            """,
        ] + ["assets", "asset_chunks", "asset_holds"].flatMap(privateLikeRecords) + [
            """
            GRANT SELECT, INSERT, DELETE
            ON magicmirror.assets, magicmirror.asset_chunks, magicmirror.asset_holds TO PUBLIC
            """,
            "GRANT UPDATE ON magicmirror.asset_holds TO PUBLIC",
            "GRANT USAGE ON SEQUENCE magicmirror.asset_content_seq TO PUBLIC",
        ],
        // Version 4: sharing (see SharedRows.swift).
        SharingSchema.migration,
        // Version 5: delete rules (see PostgreSQLDatabase+Relationships.swift), one row per
        // referring field, per scope space (a private space's rules are its owner's, by
        // row-level security); `fields_jsonb` parses a record's fields for the referrer
        // queries, `NULL` for bytes that are not JSON, so that another program's bad row
        // cannot make a delete fail.
        [
            """
            CREATE TABLE magicmirror.delete_rules (
                scope text NOT NULL,
                owner text COLLATE "C" NOT NULL,
                referring_type text COLLATE "C" NOT NULL,
                field text COLLATE "C" NOT NULL,
                cardinality text NOT NULL CHECK (cardinality IN ('one', 'optional', 'many')),
                target_type text COLLATE "C" NOT NULL,
                action text NOT NULL CHECK (action IN ('cascade', 'nullify', 'deny')),
                PRIMARY KEY (scope, owner, referring_type, field),
                CHECK ((scope = 'public' AND owner = '') OR (scope = 'private' AND owner <> '')))
            """,
            "CREATE INDEX delete_rules_by_target ON magicmirror.delete_rules (scope, owner, target_type)",
            """
            CREATE FUNCTION magicmirror.fields_jsonb(fields bytea) RETURNS jsonb
            LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
            BEGIN
                RETURN convert_from(fields, 'UTF8')::jsonb;
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END
            $$
            """,
        ] + privateLikeRecords("delete_rules") + [
            "GRANT SELECT, INSERT, UPDATE, DELETE ON magicmirror.delete_rules TO PUBLIC",
        ],
        // Version 6: what a role connecting directly may write, decided by the server (see
        // ProtectionSchema.swift).
        ProtectionSchema.migration,
        // Version 7: a commit is one call of `magicmirror.commit_records`, and zones are read
        // in pages (see CommitSchema.swift).
        CommitSchema.migration,
        // Version 8: a zone's commit lock is keyed by what only its readers see (see
        // CommitSchema.swift).
        CommitSchema.lockKeyMigration,
        // Version 9: a record is written only in a READ COMMITTED transaction, whose check of
        // its sequence reads the zone as committed now (see ProtectionSchema.swift).
        CommitSchema.readCommittedMigration,
        // Version 10: a commit reads its batch's stored records by key, never the whole zone;
        // a record's sequence is after its zone's last and its version one up at a time (see
        // CommitSchema.swift); a role locks no shared zone's row (see SharingSchema.swift).
        CommitSchema.keyedReadMigration + SharingSchema.rowLockMigration,
    ]

    /// Row-level security on `magicmirror.<table>` as on `records`: a role sees and writes
    /// public rows and its own private rows. (`table` is one of this file's names.)
    private static func privateLikeRecords(_ table: String) -> [PostgresQuery] {
        [
            PostgresQuery(unsafeSQL: "ALTER TABLE magicmirror.\(table) ENABLE ROW LEVEL SECURITY"),
            PostgresQuery(unsafeSQL: """
                CREATE POLICY scope_owner ON magicmirror.\(table)
                    USING (scope = 'public' OR owner = current_user::text)
                    WITH CHECK (scope = 'public' OR owner = current_user::text)
                """),
        ]
    }

    /// Brings the schema up to ``currentVersion`` (creating it on a fresh database) and
    /// returns the database's identifier and base generation.
    ///
    /// - Throws: ``MirrorError/Kind/unsupportedFormat`` for a schema newer than this code;
    ///   what the server answers otherwise (for example ``MirrorError/Kind/permissionDenied``
    ///   when a role that may not create the schema opens a database that has none yet).
    static func migrate(
        _ link: ServerLink, logger: Logger
    ) async throws -> (identifier: String, baseGeneration: Int) {
        try await link.withTransaction(logger: logger) { connection in
            // Every process that opens the database takes the same lock: one migrates,
            // the others then find the schema made.
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            var version = 0
            let exists = try await connection.query(
                "SELECT to_regclass('magicmirror.meta') IS NOT NULL", logger: logger)
            for try await present in exists.decode(Bool.self) where present {
                let rows = try await connection.query("SELECT schema_version FROM magicmirror.meta", logger: logger)
                for try await stored in rows.decode(Int.self) { version = stored }
            }
            guard version <= currentVersion else {
                throw MirrorError(
                    .unsupportedFormat,
                    "the database's magicmirror schema is version \(version); this MagicMirror "
                        + "reads versions up to \(currentVersion): update MagicMirrorPostgreSQL")
            }
            for step in migrations[version...] {
                for statement in step { try await connection.query(statement, logger: logger) }
            }
            if version < currentVersion {
                try await connection.query(
                    "UPDATE magicmirror.meta SET schema_version = \(currentVersion)", logger: logger)
            }
            let rows = try await connection.query(
                "SELECT identifier, base_generation FROM magicmirror.meta", logger: logger)
            for try await (identifier, base) in rows.decode((String, Int).self) {
                return (identifier, base)
            }
            throw MirrorError(.corruptEntry, "magicmirror.meta has no row")
        }
    }

    /// The advisory lock that serializes migrations.
    static let lockKey: Int64 = 0x4D61_6769_634D_6972 // "MagicMir"
}
