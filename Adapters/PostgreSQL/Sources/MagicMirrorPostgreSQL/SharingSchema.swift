import PostgresNIO

/// Version 4 of the `magicmirror` schema: sharing, enforced by the server.
///
/// - `shares`: one row per record shared with a recipient (`PRIMARY KEY (recipient,
///   record_type, id)`: a recipient has one record per id), naming the record's zone, owner
///   and creation clock, and the access. Row-level security: an owner reads and writes its
///   own shares, of zones it owns (`owns_private_zone`; version 6 replaced it with the
///   trigger `share_guard`, see ProtectionSchema.swift); a recipient reads those made to it.
/// - A recipient reads the records shared with it (and their zones' rows), updates those
///   shared read-write, and nothing else: policies on `records` and `zones`, and triggers
///   that let a recipient's update move only what a commit moves (the record's fields,
///   version, clock, writer and sequence; the zone's last sequence, to the number its own
///   statement drew), never append a record.
/// - A shared zone, `('shared', recipient, record_type)` in `zones`, is the recipient's
///   view: it stores no record, but its sequence moves (and a `NOTIFY` goes out), in the
///   same transaction, with every change to a share or to a shared record, so a shared
///   mirror's token and notifications work as any zone's. A deleted record's shares go
///   with it.
enum SharingSchema {
    /// The one condition under which a row of `records` (aliased `records`) is shared with
    /// the current role, with `access` among `accesses`.
    private static func sharedWithMe(_ accesses: String) -> String {
        """
        records.scope = 'private' AND EXISTS (
            SELECT 1 FROM magicmirror.shares s
            WHERE s.zone_id = records.zone_id AND s.id = records.id AND s.owner = records.owner
              AND s.recipient = current_user::text AND s.access IN (\(accesses))
              AND s.created_millis = records.created_millis AND s.created_counter = records.created_counter)
        """
    }

    static let migration: [PostgresQuery] = [
        // The check of `zones` (its only one) admitted public and private zones only.
        """
        DO $do$
        DECLARE
            c text;
        BEGIN
            FOR c IN SELECT conname FROM pg_constraint
                        WHERE conrelid = 'magicmirror.zones'::regclass AND contype = 'c' LOOP
                EXECUTE format('ALTER TABLE magicmirror.zones DROP CONSTRAINT %I', c);
            END LOOP;
        END
        $do$
        """,
        """
        ALTER TABLE magicmirror.zones ADD CONSTRAINT zones_scope_owner CHECK (
            (scope = 'public' AND owner = '') OR (scope IN ('private', 'shared') AND owner <> ''))
        """,
        """
        CREATE TABLE magicmirror.shares (
            zone_id bigint NOT NULL REFERENCES magicmirror.zones,
            owner text COLLATE "C" NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            id text COLLATE "C" NOT NULL,
            recipient text COLLATE "C" NOT NULL,
            access text NOT NULL CHECK (access IN ('readOnly', 'readWrite')),
            created_millis bigint NOT NULL,
            created_counter bigint NOT NULL,
            PRIMARY KEY (recipient, record_type, id),
            CHECK (recipient <> owner))
        """,
        "CREATE INDEX shares_by_record ON magicmirror.shares (zone_id, id)",
        // Whether `role` owns the private zone `zone` of `record_type`: read past row-level
        // security (the policies of `zones` read `shares`, so the policy of `shares` may not
        // read `zones` through them).
        """
        CREATE FUNCTION magicmirror.owns_private_zone(p_zone bigint, p_record_type text, p_role text)
        RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            SELECT EXISTS (
                SELECT 1 FROM magicmirror.zones z
                WHERE z.zone_id = p_zone AND z.scope = 'private' AND z.owner = p_role
                  AND z.record_type = p_record_type)
        $fn$
        """,
        // Moves the sequence of a recipient's shared zone (made on first use) and notifies:
        // the zone's row is locked before the number is drawn, so numbers become visible in
        // the order they were drawn.
        """
        CREATE FUNCTION magicmirror.touch_shared_zone(p_recipient text, p_record_type text)
        RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
        DECLARE
            z record;
            drawn bigint;
        BEGIN
            INSERT INTO magicmirror.zones (scope, owner, record_type, generation)
            SELECT 'shared', p_recipient, p_record_type, base_generation FROM magicmirror.meta
            ON CONFLICT (scope, owner, record_type) DO NOTHING;
            SELECT zone_id, generation INTO z FROM magicmirror.zones
            WHERE scope = 'shared' AND owner = p_recipient AND record_type = p_record_type FOR UPDATE;
            drawn := nextval('magicmirror.change_seq');
            UPDATE magicmirror.zones SET last_seq = drawn WHERE zone_id = z.zone_id;
            PERFORM pg_notify('\(unescaped: NotificationPayload.channel)',
                              concat_ws(' ', z.zone_id, z.generation, drawn, 'magicmirror-shares'));
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION magicmirror.touch_shared_zone(text, text) FROM PUBLIC",
        """
        CREATE FUNCTION magicmirror.share_changed() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
        BEGIN
            IF TG_OP <> 'INSERT' THEN PERFORM magicmirror.touch_shared_zone(OLD.recipient, OLD.record_type); END IF;
            IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.recipient <> OLD.recipient
                                      OR NEW.record_type <> OLD.record_type) THEN
                PERFORM magicmirror.touch_shared_zone(NEW.recipient, NEW.record_type);
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        """
        CREATE TRIGGER share_changed AFTER INSERT OR UPDATE OR DELETE ON magicmirror.shares
        FOR EACH ROW EXECUTE FUNCTION magicmirror.share_changed()
        """,
        // A change to a shared record moves its recipients' shared zones; a deletion ends
        // its shares.
        """
        CREATE FUNCTION magicmirror.shared_record_changed() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
        DECLARE
            s record;
        BEGIN
            IF NEW.fields IS NULL THEN
                DELETE FROM magicmirror.shares WHERE zone_id = NEW.zone_id AND id = NEW.id;
            ELSE
                FOR s IN SELECT recipient, record_type FROM magicmirror.shares
                         WHERE zone_id = NEW.zone_id AND id = NEW.id ORDER BY recipient LOOP
                    PERFORM magicmirror.touch_shared_zone(s.recipient, s.record_type);
                END LOOP;
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        """
        CREATE TRIGGER shared_record_changed AFTER INSERT OR UPDATE ON magicmirror.records
        FOR EACH ROW EXECUTE FUNCTION magicmirror.shared_record_changed()
        """,
        // What a recipient's write may change: for a record, what a commit changes (its
        // sequence drawn by the same statement, its version one up, fields kept); never a
        // record appended to another role's zone. For a zone, its last sequence only, to the
        // number the same statement drew.
        """
        CREATE FUNCTION magicmirror.recipient_write_guard() RETURNS trigger
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
        BEGIN
            IF TG_TABLE_NAME = 'records' THEN
                IF NOT EXISTS (SELECT 1 FROM magicmirror.shares s WHERE s.zone_id = NEW.zone_id AND s.id = NEW.id
                               AND s.owner = NEW.owner AND s.recipient = current_user::text) THEN
                    RETURN NEW;
                END IF;
                IF TG_OP = 'INSERT' OR NEW.zone_id <> OLD.zone_id OR NEW.scope <> OLD.scope
                   OR NEW.owner <> OLD.owner OR NEW.id <> OLD.id OR NEW.fields IS NULL
                   OR NEW.created_millis <> OLD.created_millis OR NEW.created_counter <> OLD.created_counter
                   OR NEW.version <> OLD.version + 1 OR NEW.seq <> currval('magicmirror.change_seq') THEN
                    RAISE EXCEPTION 'a recipient edits the fields of a shared record, nothing else'
                        USING ERRCODE = '42501';
                END IF;
            ELSE
                IF OLD.scope <> 'private' OR OLD.owner = current_user::text OR NOT EXISTS (
                       SELECT 1 FROM magicmirror.shares s WHERE s.zone_id = OLD.zone_id
                       AND s.recipient = current_user::text) THEN
                    RETURN NEW;
                END IF;
                IF NEW.zone_id <> OLD.zone_id OR NEW.scope <> OLD.scope OR NEW.owner <> OLD.owner
                   OR NEW.record_type <> OLD.record_type OR NEW.generation <> OLD.generation
                   OR NEW.base_seq <> OLD.base_seq OR NEW.assets_epoch <> OLD.assets_epoch
                   OR NEW.last_seq <> currval('magicmirror.change_seq') THEN
                    RAISE EXCEPTION 'a recipient moves only the sequence of a shared record''s zone'
                        USING ERRCODE = '42501';
                END IF;
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        """
        CREATE TRIGGER recipient_write_guard AFTER INSERT ON magicmirror.records
        FOR EACH ROW EXECUTE FUNCTION magicmirror.recipient_write_guard()
        """,
        """
        CREATE TRIGGER recipient_update_guard BEFORE UPDATE ON magicmirror.records
        FOR EACH ROW EXECUTE FUNCTION magicmirror.recipient_write_guard()
        """,
        """
        CREATE TRIGGER recipient_update_guard BEFORE UPDATE ON magicmirror.zones
        FOR EACH ROW EXECUTE FUNCTION magicmirror.recipient_write_guard()
        """,
        "ALTER TABLE magicmirror.shares ENABLE ROW LEVEL SECURITY",
        """
        CREATE POLICY owner_shares ON magicmirror.shares
            USING (owner = current_user::text)
            WITH CHECK (owner = current_user::text
                        AND magicmirror.owns_private_zone(zone_id, record_type, current_user::text))
        """,
        """
        CREATE POLICY recipient_reads ON magicmirror.shares FOR SELECT
            USING (recipient = current_user::text)
        """,
        PostgresQuery(unsafeSQL: """
            CREATE POLICY shared_read ON magicmirror.records FOR SELECT
                USING (\(sharedWithMe("'readOnly', 'readWrite'")))
            """),
        PostgresQuery(unsafeSQL: """
            CREATE POLICY shared_insert ON magicmirror.records FOR INSERT
                WITH CHECK (fields IS NOT NULL AND \(sharedWithMe("'readWrite'")))
            """),
        PostgresQuery(unsafeSQL: """
            CREATE POLICY shared_update ON magicmirror.records FOR UPDATE
                USING (fields IS NOT NULL AND \(sharedWithMe("'readWrite'")))
                WITH CHECK (fields IS NOT NULL AND \(sharedWithMe("'readWrite'")))
            """),
        """
        CREATE POLICY shared_zone_read ON magicmirror.zones FOR SELECT
            USING (scope = 'private' AND EXISTS (
                SELECT 1 FROM magicmirror.shares s
                WHERE s.zone_id = zones.zone_id AND s.recipient = current_user::text))
        """,
        """
        CREATE POLICY shared_zone_update ON magicmirror.zones FOR UPDATE
            USING (scope = 'private' AND EXISTS (
                SELECT 1 FROM magicmirror.shares s
                WHERE s.zone_id = zones.zone_id AND s.recipient = current_user::text AND s.access = 'readWrite'))
        """,
        "GRANT SELECT, INSERT, UPDATE, DELETE ON magicmirror.shares TO PUBLIC",
    ]

    /// Version 10 (found by an attack pass on version 9, 2026-11-28): a recipient held its
    /// own shared zone's row locked (`SELECT … FOR UPDATE`, or a row of its own placed in that
    /// zone, whose foreign key holds `KEY SHARE`), so `touch_shared_zone` waited, and with it
    /// the owner's commit, under its zone's commit lock, and every commit to that zone
    /// behind it, and the revocation of the share. Now a role updates or locks no shared
    /// zone's row (only `touch_shared_zone`, as the schema's owner, moves one), and
    /// `touch_shared_zone` locks the row `FOR NO KEY UPDATE`, which a foreign key's
    /// `KEY SHARE` does not block.
    static let rowLockMigration: [PostgresQuery] = [
        "DROP POLICY scope_owner ON magicmirror.zones",
        "CREATE POLICY scope_owner ON magicmirror.zones FOR SELECT USING (scope = 'public' OR owner = current_user::text)",
        """
        CREATE POLICY scope_owner_insert ON magicmirror.zones FOR INSERT
            WITH CHECK (scope = 'public' OR owner = current_user::text)
        """,
        """
        CREATE POLICY scope_owner_update ON magicmirror.zones FOR UPDATE
            USING (scope = 'public' OR (scope = 'private' AND owner = current_user::text))
            WITH CHECK (scope = 'public' OR (scope = 'private' AND owner = current_user::text))
        """,
        touchSharedZone(rowLock: "FOR NO KEY UPDATE"),
    ]

    /// `touch_shared_zone` in its form since version 6 (the notification of
    /// `magicmirror.notification`), locking the shared zone's row with `rowLock`.
    static func touchSharedZone(rowLock: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: """
            CREATE OR REPLACE FUNCTION magicmirror.touch_shared_zone(p_recipient text, p_record_type text)
            RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            DECLARE
                z record;
                drawn bigint;
            BEGIN
                INSERT INTO magicmirror.zones (scope, owner, record_type, generation)
                SELECT 'shared', p_recipient, p_record_type, base_generation FROM magicmirror.meta
                ON CONFLICT (scope, owner, record_type) DO NOTHING;
                SELECT zone_id, notify_key INTO z FROM magicmirror.zones
                WHERE scope = 'shared' AND owner = p_recipient AND record_type = p_record_type \(rowLock);
                drawn := nextval('magicmirror.change_seq');
                UPDATE magicmirror.zones SET last_seq = drawn WHERE zone_id = z.zone_id;
                PERFORM pg_notify('\(NotificationPayload.channel)', magicmirror.notification(z.notify_key, drawn));
            END
            $fn$
            """)
    }
}
