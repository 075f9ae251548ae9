import PostgresNIO

/// Version 6 of the `magicmirror` schema: what a role connecting directly may write, decided
/// by the server whatever the role sends (the threat model is in the article "Running on
/// PostgreSQL").
///
/// - A row's place follows from its zone: `place_in_zone` sets the `scope` and `owner` of
///   every new row of `records`, `assets` and `asset_holds` from the zone's row, and the
///   policy of `records` admits a row only when its scope and owner are its zone's. A role
///   cannot move a row: clients update only the columns a commit writes (column privileges).
/// - Zones: clients insert only a zone's scope, owner and record type (the server sets the
///   rest: generation, sequences, notification key) and update only its last sequence (to
///   the number the same statement drew from `change_seq`, upwards) and its assets epoch
///   (one up). A record's sequence, likewise, is the number its statement drew, after its
///   zone's; an asset's content number is the one its upload drew. The owner of a table
///   (and a superuser) is not held to these checks.
/// - Shares: a role shares records of its own private zones only, with a role that exists
///   (`share_guard`, a trigger that reads `zones` as the role, replacing the function
///   `owns_private_zone`, which told any role who owns which zone).
/// - Every function pins its `search_path`, and the adapter's sessions start with
///   `search_path = pg_catalog, pg_temp`, so no function another role creates (in `public`)
///   is ever called in their place.
/// - A `NOTIFY` carries `sequence tag`: the tag is a digest of the zone's notification key
///   (a random value that only roles who can read the zone's row see) and the sequence, so a
///   listener recognises its own zones' notifications and learns nothing of others' zones.
/// - Rows that broke these rules before (a record or asset whose scope or owner is not its
///   zone's, a share of a zone its owner does not own) were not written by MagicMirror:
///   the migration deletes them.
enum ProtectionSchema {
    /// The first key of the advisory lock that orders the commits of a zone (the second is
    /// the zone's id): "MM" in ASCII, so that an application's own advisory locks on small
    /// numbers never meet it.
    static let commitLockClass = 0x4D4D
    /// The notification text of a change with sequence `seq` to the zone whose notification
    /// key is `key`, as ``NotificationPayload`` reads it.
    static let notificationFunction: PostgresQuery = """
        CREATE FUNCTION magicmirror.notification(p_key text, p_seq bigint) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $fn$
            SELECT p_seq::text || ' ' || left(encode(sha256(convert_to(p_key || ' ' || p_seq::text, 'UTF8')), 'hex'), 32)
        $fn$
        """

    /// Whether the current role is held to the checks of the triggers: not when it owns the
    /// table, or bypasses row-level security.
    private static let exempt = """
        current_user::text = (SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = TG_RELID)
        OR (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)
        """

    static let migration: [PostgresQuery] = [
        // Rows MagicMirror did not write: placed apart from their zone, or shares of a zone
        // their owner does not own.
        """
        DELETE FROM magicmirror.shares s WHERE NOT EXISTS (
            SELECT 1 FROM magicmirror.zones z WHERE z.zone_id = s.zone_id AND z.scope = 'private'
              AND z.owner = s.owner AND z.record_type = s.record_type)
        """,
        """
        DELETE FROM magicmirror.records r USING magicmirror.zones z
        WHERE r.zone_id = z.zone_id AND (r.scope <> z.scope OR r.owner <> z.owner)
        """,
        """
        DELETE FROM magicmirror.asset_holds h USING magicmirror.zones z
        WHERE h.zone_id = z.zone_id AND (h.scope <> z.scope OR h.owner <> z.owner)
        """,
        """
        DELETE FROM magicmirror.assets a USING magicmirror.zones z
        WHERE a.zone_id = z.zone_id AND (a.scope <> z.scope OR a.owner <> z.owner)
        """,
        // A volatile default: every existing zone gets its own key.
        "ALTER TABLE magicmirror.zones ADD COLUMN notify_key text NOT NULL DEFAULT gen_random_uuid()::text",
        "ALTER FUNCTION magicmirror.fields_jsonb(bytea) SET search_path = pg_catalog, pg_temp",
        notificationFunction,
        // What clients may write, by column.
        "REVOKE INSERT, UPDATE ON magicmirror.zones FROM PUBLIC",
        "GRANT INSERT (scope, owner, record_type, generation) ON magicmirror.zones TO PUBLIC",
        "GRANT UPDATE (last_seq, assets_epoch) ON magicmirror.zones TO PUBLIC",
        "REVOKE UPDATE ON magicmirror.records FROM PUBLIC",
        """
        GRANT UPDATE (version, fields, modified_millis, modified_counter, writer, seq, created_millis, created_counter)
        ON magicmirror.records TO PUBLIC
        """,
        "REVOKE UPDATE ON magicmirror.asset_holds FROM PUBLIC",
        "GRANT UPDATE (lock_key) ON magicmirror.asset_holds TO PUBLIC",
        "REVOKE UPDATE ON magicmirror.delete_rules FROM PUBLIC",
        "GRANT UPDATE (cardinality, target_type, action) ON magicmirror.delete_rules TO PUBLIC",
        // A new zone: what the server decides.
        """
        CREATE FUNCTION magicmirror.zone_created() RETURNS trigger
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
        BEGIN
            NEW.generation := (SELECT base_generation FROM magicmirror.meta);
            NEW.base_seq := 0;
            NEW.last_seq := 0;
            NEW.assets_epoch := 0;
            NEW.notify_key := gen_random_uuid()::text;
            RETURN NEW;
        END
        $fn$
        """,
        """
        CREATE TRIGGER zone_created BEFORE INSERT ON magicmirror.zones
        FOR EACH ROW EXECUTE FUNCTION magicmirror.zone_created()
        """,
        zoneMoved(replacing: false, lockKey: nil),
        """
        CREATE TRIGGER zone_moved BEFORE UPDATE ON magicmirror.zones
        FOR EACH ROW EXECUTE FUNCTION magicmirror.zone_moved()
        """,
        // A new row of a zone: placed by its zone, read past row-level security (a row
        // whose zone does not exist is refused by its foreign key).
        """
        CREATE FUNCTION magicmirror.place_in_zone() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
        DECLARE
            z record;
        BEGIN
            SELECT scope, owner INTO z FROM magicmirror.zones WHERE zone_id = NEW.zone_id;
            IF FOUND THEN
                NEW.scope := z.scope;
                NEW.owner := z.owner;
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION magicmirror.place_in_zone() FROM PUBLIC",
        // The sharing triggers run as the schema's owner: a role that could execute them
        // would attach them to a table of its own (a temporary one) and run them with the
        // owner's rights, dropping or touching other roles' shares. A trigger fires whatever
        // the privileges of the role whose statement fired it.
        "REVOKE ALL ON FUNCTION magicmirror.share_changed() FROM PUBLIC",
        "REVOKE ALL ON FUNCTION magicmirror.shared_record_changed() FROM PUBLIC",
    ] + ["records", "assets", "asset_holds"].map { table in
        PostgresQuery(unsafeSQL: """
            CREATE TRIGGER a_place_in_zone BEFORE INSERT ON magicmirror.\(table)
            FOR EACH ROW EXECUTE FUNCTION magicmirror.place_in_zone()
            """)
    } + [
        // A record's sequence: the number its statement drew, not before its zone's last.
        // The check runs under the zone's commit lock (a transaction-level advisory lock on
        // the zone, taken here, held to the end of the transaction), with a fresh snapshot
        // (VOLATILE): a role's own statements that drew a number and held their transaction
        // open made later commits wait for them, instead of letting a later number be
        // published first and hiding the earlier change from every reader past it. The
        // adapter's commit moves the zone's last sequence to its own number in the same
        // statement, so the check admits a last sequence equal to the row's (only the
        // session that drew a number can have moved it there).
        recordSequenced(replacing: false, lockKey: "(NEW.zone_id % 2147483647)::int4"),
        """
        CREATE TRIGGER b_record_sequenced BEFORE INSERT OR UPDATE ON magicmirror.records
        FOR EACH ROW EXECUTE FUNCTION magicmirror.record_sequenced()
        """,
        // An asset's content number: the one its upload drew (in the same session), so no
        // role can take the numbers another role's upload will draw next.
        PostgresQuery(unsafeSQL: """
            CREATE FUNCTION magicmirror.asset_content_drawn() RETURNS trigger
            LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                IF \(exempt) THEN
                    RETURN NEW;
                END IF;
                IF NEW.content <> currval('magicmirror.asset_content_seq') THEN
                    RAISE EXCEPTION 'an asset''s content number is the one its upload drew' USING ERRCODE = '42501';
                END IF;
                RETURN NEW;
            END
            $fn$
            """),
    ] + ["assets", "asset_chunks"].map { table in
        PostgresQuery(unsafeSQL: """
            CREATE TRIGGER asset_content_drawn BEFORE INSERT ON magicmirror.\(table)
            FOR EACH ROW EXECUTE FUNCTION magicmirror.asset_content_drawn()
            """)
    } + [
        // The zone checks the row: its scope and owner are its zone's, and the role may
        // read and write that zone.
        "DROP POLICY scope_owner ON magicmirror.records",
        """
        CREATE POLICY scope_owner ON magicmirror.records
            USING (EXISTS (
                SELECT 1 FROM magicmirror.zones z
                WHERE z.zone_id = records.zone_id AND z.scope = records.scope AND z.owner = records.owner
                  AND (z.scope = 'public' OR z.owner = current_user::text)))
            WITH CHECK (EXISTS (
                SELECT 1 FROM magicmirror.zones z
                WHERE z.zone_id = records.zone_id AND z.scope = records.scope AND z.owner = records.owner
                  AND (z.scope = 'public' OR z.owner = current_user::text)))
        """,
        // Shares: of the role's own private zone (read as the role), with a role that exists.
        "DROP POLICY owner_shares ON magicmirror.shares",
        """
        CREATE POLICY owner_shares ON magicmirror.shares
            USING (owner = current_user::text) WITH CHECK (owner = current_user::text)
        """,
        "DROP FUNCTION magicmirror.owns_private_zone(bigint, text, text)",
        """
        CREATE FUNCTION magicmirror.share_guard() RETURNS trigger
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM magicmirror.zones z WHERE z.zone_id = NEW.zone_id AND z.scope = 'private'
                           AND z.owner = NEW.owner AND z.record_type = NEW.record_type) THEN
                RAISE EXCEPTION 'a role shares records of its own private zones only' USING ERRCODE = '42501';
            END IF;
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = NEW.recipient) THEN
                RAISE EXCEPTION 'there is no role named %', quote_ident(NEW.recipient) USING ERRCODE = '42704';
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        """
        CREATE TRIGGER share_guard BEFORE INSERT OR UPDATE ON magicmirror.shares
        FOR EACH ROW EXECUTE FUNCTION magicmirror.share_guard()
        """,
        // The shared zone's notification, in the new form.
        SharingSchema.touchSharedZone(rowLock: "FOR UPDATE"),
    ]

    /// The trigger function `zone_moved`: a zone's last sequence moves only up, to the number
    /// its commit drew, and its assets epoch one up at a time. With a `lockKey` (schema
    /// version 9, `hashtext(OLD.notify_key)`), a move of the last sequence first takes the
    /// zone's commit lock, as a record's write does (`record_sequenced`): a role's own
    /// `UPDATE` of the zone could otherwise move it past a record written under an earlier
    /// number by a transaction still open (its own, in another session), which then
    /// committed behind a token readers already held.
    static func zoneMoved(replacing: Bool, lockKey: String?) -> PostgresQuery {
        let lock = lockKey.map { "PERFORM pg_advisory_xact_lock(\(commitLockClass), \($0));" } ?? ""
        return PostgresQuery(unsafeSQL: """
            \(replacing ? "CREATE OR REPLACE" : "CREATE") FUNCTION magicmirror.zone_moved() RETURNS trigger
            LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                IF \(exempt) THEN
                    RETURN NEW;
                END IF;
                IF NEW.last_seq <> OLD.last_seq THEN
                    \(lock)
                    IF NEW.last_seq < OLD.last_seq OR NEW.last_seq <> currval('magicmirror.change_seq') THEN
                        RAISE EXCEPTION 'a zone''s last sequence moves only up, to the number its commit drew'
                            USING ERRCODE = '42501';
                    END IF;
                END IF;
                IF NEW.assets_epoch <> OLD.assets_epoch AND NEW.assets_epoch <> OLD.assets_epoch + 1 THEN
                    RAISE EXCEPTION 'a zone''s assets epoch moves one up at a time' USING ERRCODE = '42501';
                END IF;
                RETURN NEW;
            END
            $fn$
            """)
    }

    /// The trigger function `record_sequenced`, whose commit lock's second key is `lockKey`.
    ///
    /// With `readCommittedOnly` (schema version 9), a record written in a transaction of
    /// another isolation level is refused: the check of its sequence against the zone's last
    /// must read the zone as committed now, which a `REPEATABLE READ` or `SERIALIZABLE`
    /// transaction does not (its snapshot is as old as its first statement): a role that drew
    /// a number, let a later commit land and be read, then wrote a record under the old
    /// number would have stored a change behind a token readers already hold, which no
    /// reader would ever pull.
    ///
    /// With `strictAndVersioned` (schema version 10):
    /// - a record's sequence is after its zone's last, never equal to it. `currval` is the
    ///   session's, not the transaction's: after a commit moved the zone to its number, a
    ///   later transaction of the same session could write any record of the zone under that
    ///   number, behind the token every reader then held. The adapter's statements write
    ///   their records before they move the zone;
    /// - a record's version moves one up at a time: 1 when inserted, the stored version + 1
    ///   when updated (what every commit writes). A role could otherwise store a public record
    ///   at the largest version, or take it back to an earlier one, and mirrors, which apply
    ///   a pulled record only when its version is above theirs, would ignore every later
    ///   change of it. An insert whose version is not 1 is an upsert's proposed row, to be
    ///   checked as an update, only when the record exists: checked under the zone's commit
    ///   lock, which a compaction holds while it deletes tombstones, so that a record deleted
    ///   meanwhile is made again at version 1.
    static func recordSequenced(
        replacing: Bool, lockKey: String, readCommittedOnly: Bool = false, strictAndVersioned: Bool = false
    ) -> PostgresQuery {
        let isolation = readCommittedOnly ? """
                IF current_setting('transaction_isolation') <> 'read committed' THEN
                    RAISE EXCEPTION 'a record is written in a READ COMMITTED transaction, where its sequence is checked against its zone as committed now (this one is %)',
                        current_setting('transaction_isolation') USING ERRCODE = '42501';
                END IF;
            """ : ""
        let after = strictAndVersioned ? "<" : "<="
        let versioned = strictAndVersioned ? """
                IF TG_OP = 'UPDATE' AND (OLD.version = 9223372036854775807 OR NEW.version <> OLD.version + 1)
                   OR TG_OP = 'INSERT' AND NEW.version <> 1 AND NOT EXISTS (
                       SELECT 1 FROM magicmirror.records r WHERE r.zone_id = NEW.zone_id AND r.id = NEW.id) THEN
                    RAISE EXCEPTION 'a record''s version moves one up at a time: 1 when it is made, the stored version + 1 when it changes'
                        USING ERRCODE = '42501';
                END IF;
            """ : ""
        return PostgresQuery(unsafeSQL: """
            \(replacing ? "CREATE OR REPLACE" : "CREATE") FUNCTION magicmirror.record_sequenced() RETURNS trigger
            LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                IF \(exempt) THEN
                    RETURN NEW;
                END IF;
            \(isolation)
                PERFORM pg_advisory_xact_lock(\(commitLockClass), \(lockKey));
            \(versioned)
                IF NEW.seq <> currval('magicmirror.change_seq') OR NOT EXISTS (
                       SELECT 1 FROM magicmirror.zones z WHERE z.zone_id = NEW.zone_id AND z.last_seq \(after) NEW.seq) THEN
                    RAISE EXCEPTION 'a record''s sequence is the number its commit drew' USING ERRCODE = '42501';
                END IF;
                RETURN NEW;
            END
            $fn$
            """)
    }
}
