import PostgresNIO

/// Version 7 of the `magicmirror` schema: a commit is one statement, a call of
/// `magicmirror.commit_records`, that queues behind the other commits of its zone instead of
/// starting again when one landed first; and an index that reads a zone in pages.
///
/// `commit_records(scope, owner, record_type, writer, ids, bases, fields, deleted, millis,
/// counters)` does, in the caller's transaction (its own when called alone):
///
/// 1. find the zone (making its row for a zone never written) and take its commit lock, the
///    transaction-level advisory lock `record_sequenced` takes (keyed by the zone's
///    notification key since version 8): the commits of one zone take
///    turns here, in the order they came (the lock manager hands the lock to its waiters in
///    turn), and a role's own statements that drew a sequence number for the zone and hold
///    their transaction open are waited for; then lock the zone's row (`FOR UPDATE`), as
///    collections and compactions do. Every writer of the adapter takes a zone's commit
///    lock before its row, so none waits for another in a circle;
/// 2. when the commit deletes and a delete rule of the zone's scope space targets its record
///    type, answer `rules` and write nothing: the client makes it a linked commit
///    (``LinkedCommit``), which locks every zone the rules reach;
/// 3. read the stored records of the batch (a statement after the locks: it sees everything
///    committed before) and decide each operation by the rules of `CommitPlan` (a retry of
///    a change already stored, same writer and clock, stores nothing; a base version that is
///    not the stored one is a conflict, and then nothing is stored); answer the stored
///    records the client needs to make the outcome (their columns, and their fields for a
///    retry or a conflict);
/// 4. refuse a record that refers to an asset with a value that is no digest (`invalid`) or
///    to an asset the zone does not hold (`missing`), storing nothing;
/// 5. draw the next number of `change_seq`, move the zone's `last_seq` to it and upsert every
///    record with it (one statement), release the writer's holds on the assets the records
///    refer to, and `NOTIFY` (sent when the transaction commits).
///
/// It is `SECURITY INVOKER`: it runs with the rights of `current_user`, so row-level
/// security, column privileges and every trigger of version 6 apply to each of its
/// statements exactly as to a client's own, and a caller can do nothing through it that it
/// could not do by hand (a relay that runs it after `SET LOCAL ROLE` acts as that role). It
/// draws the sequence number itself: a caller cannot pass one. Its `search_path` is pinned.
enum CommitSchema {
    static let migration: [PostgresQuery] = [
        // Pages of a zone in the order of their last change: `(zone_id, seq, id)` keys every
        // row, so a page starts where the last ended without sorting a commit's records.
        "CREATE INDEX records_by_seq_id ON magicmirror.records (zone_id, seq, id)",
        "DROP INDEX magicmirror.records_by_seq",
        commitRecords(replacing: false) { "(\($0).zone_id % 2147483647)::int4" },
    ]

    /// Version 8: a zone's commit lock is keyed by its notification key (`hashtext`), which
    /// only the roles that can read the zone's row see, not by its number: advisory locks
    /// need no privilege, and numbers are counted from 1, so any role of the cluster could
    /// hold every zone's commit lock and stop its commits.
    static let lockKeyMigration: [PostgresQuery] = [
        commitRecords(replacing: true) { "hashtext(\($0).notify_key)" },
        ProtectionSchema.recordSequenced(replacing: true, lockKey: zoneLockKey),
    ]

    /// Version 9: a record is written only in a `READ COMMITTED` transaction (see
    /// ``ProtectionSchema/recordSequenced(replacing:lockKey:readCommittedOnly:)``), and a
    /// zone's last sequence moves only under its commit lock
    /// (``ProtectionSchema/zoneMoved(replacing:lockKey:)``).
    static let readCommittedMigration: [PostgresQuery] = [
        ProtectionSchema.recordSequenced(replacing: true, lockKey: zoneLockKey, readCommittedOnly: true),
        ProtectionSchema.zoneMoved(replacing: true, lockKey: "hashtext(OLD.notify_key)"),
    ]

    /// Version 10: a commit reads the stored records of its batch one by one, by the key
    /// `(zone_id, id)`, whatever plan the session's statistics made: the join of version 7
    /// left the choice to the planner, whose generic plan (made once per session, often
    /// while the zone was small) read every record of the zone at each commit.
    ///
    /// And (found by an attack pass on version 9, 2026-11-28): a record's sequence is after
    /// its zone's last, never equal, and its version moves one up at a time (see
    /// ``ProtectionSchema/recordSequenced(replacing:lockKey:readCommittedOnly:strictAndVersioned:)``);
    /// `commit_records` writes its records before it moves the zone.
    static let keyedReadMigration: [PostgresQuery] = [
        commitRecords(replacing: true, readsByKey: true) { "hashtext(\($0).notify_key)" },
        ProtectionSchema.recordSequenced(
            replacing: true, lockKey: zoneLockKey, readCommittedOnly: true, strictAndVersioned: true),
    ]

    /// The second key of a zone's commit lock in `record_sequenced`, since version 8.
    private static let zoneLockKey = "(SELECT hashtext(z.notify_key) FROM magicmirror.zones z WHERE z.zone_id = NEW.zone_id)"

    /// `commit_records`' parameters, in order: each name and type. Its declaration, the
    /// calls (which cast each argument to its type) and the relay's function that calls it
    /// are made from this list.
    static let parameterList: [(name: String, type: String)] = [
        ("p_scope", "text"), ("p_owner", "text"), ("p_record_type", "text"), ("p_writer", "text"),
        ("p_ids", "text[]"), ("p_bases", "int8[]"), ("p_fields", "bytea[]"), ("p_deleted", "boolean[]"),
        ("p_millis", "int8[]"), ("p_counters", "int8[]"),
    ]

    /// `commit_records`' parameters, as its declaration names them (`p_scope text, …`).
    static let parameters = parameterList.map { "\($0.name) \($0.type)" }.joined(separator: ", ")

    /// A call of `function` with `leading` text arguments (`$1` to `$leading`), then
    /// `commit_records`' arguments, each cast to its type.
    static func call(_ function: String, leading: Int = 0) -> String {
        let placeholders = (0..<leading).map { "$\($0 + 1)::text" }
            + parameterList.enumerated().map { "$\(leading + $0.offset + 1)::\($0.element.type)" }
        return "SELECT * FROM \(function)(\(placeholders.joined(separator: ", ")))"
    }

    /// The columns of `commit_records`' rows, as its declaration names them.
    static let columns = """
        o_kind text, o_status text, o_generation int8, o_base int8, o_last int8, o_seq int8, o_n int4,
        o_version int8, o_fields bytea, o_deleted boolean, o_millis int8, o_counter int8, o_writer text,
        o_created_millis int8, o_created_counter int8, o_id text, o_value text
        """

    /// `commit_records`, whose commit lock's second key is `lockKey(zone alias)`; with
    /// `readsByKey` (since version 10) each stored record of the batch is read by its key, in
    /// a subquery the planner cannot flatten into a join (`OFFSET 0`), and the records are
    /// written before the zone moves.
    static func commitRecords(replacing: Bool, readsByKey: Bool = false, lockKey: (String) -> String) -> PostgresQuery {
        let stored = readsByKey
            ? """
                LEFT JOIN LATERAL (
                            SELECT r.version, r.fields, r.modified_millis, r.modified_counter, r.writer,
                                   r.created_millis, r.created_counter
                            FROM magicmirror.records r WHERE r.zone_id = z.zone_id AND r.id = o.id OFFSET 0) r ON true
                """
            : "LEFT JOIN magicmirror.records r ON r.zone_id = z.zone_id AND r.id = o.id"
        // Version 7 moved the zone in a data-modifying CTE of the records' statement, in an
        // order PostgreSQL does not promise; since version 10 the records' write is the CTE
        // and the zone's move reads it, so the records are written first (record_sequenced
        // wants the zone's last sequence below theirs), in the same statement (whose AFTER
        // triggers, which may draw numbers of their own for shared zones, run at its end).
        let move = "UPDATE magicmirror.zones zn SET last_seq = drawn WHERE zn.zone_id = z.zone_id"
        let moveFirst = readsByKey ? "WITH written AS (\n                            " : "WITH moved AS (\(move))\n                            "
        let moveAfter = readsByKey ? "\n                            RETURNING 1)\n                            \(move) AND (SELECT count(*) FROM written) >= 0" : ""
        return PostgresQuery(unsafeSQL: """
            \(replacing ? "CREATE OR REPLACE" : "CREATE") FUNCTION magicmirror.commit_records(\(parameters))
            RETURNS TABLE (\(columns))
            LANGUAGE plpgsql VOLATILE
            SET search_path = pg_catalog, pg_temp
            -- The statements' plans do not depend on the arrays' sizes: planned once per session.
            SET plan_cache_mode = force_generic_plan
            AS $fn$
            DECLARE
                op_count int4 := coalesce(cardinality(p_ids), 0);
                zone_number int8;
                zone_locked boolean := false;
                rules_apply boolean := false;
                lock_taken text;
                z record;
                batch record;
                status text;
                drawn int8;
                refs_ids text[];
                refs_values jsonb[];
                problem_ids text[];
                problem_values text[];
            BEGIN
                IF coalesce(cardinality(p_bases), 0) <> op_count OR coalesce(cardinality(p_fields), 0) <> op_count
                   OR coalesce(cardinality(p_deleted), 0) <> op_count OR coalesce(cardinality(p_millis), 0) <> op_count
                   OR coalesce(cardinality(p_counters), 0) <> op_count OR p_writer IS NULL
                   OR array_position(p_ids, NULL) IS NOT NULL THEN
                    RAISE EXCEPTION 'commit_records: one id, base version, fields, deletion flag and clock per operation'
                        USING ERRCODE = '22023';
                END IF;

                -- 1. The zone (made first when never written; row-level security decides which
                -- zones the role may see, and make), its commit lock, then its row, locked.
                -- The commit lock is the advisory lock `record_sequenced` takes: a queue in
                -- the order the commits came (row locks are not: a newcomer can take a row
                -- between two waiters), and statements of the role's own that drew a number
                -- for the zone are waited for. Every writer of the adapter takes a zone's
                -- commit lock before its row, so none waits for the other.
                SELECT zn.zone_id, pg_advisory_xact_lock(\(ProtectionSchema.commitLockClass), \(lockKey("zn")))::text
                INTO zone_number, lock_taken FROM magicmirror.zones zn
                WHERE zn.scope = p_scope AND zn.owner = p_owner AND zn.record_type = p_record_type;
                IF NOT FOUND THEN
                    INSERT INTO magicmirror.zones (scope, owner, record_type, generation)
                    VALUES (p_scope, p_owner, p_record_type, 0)
                    ON CONFLICT (scope, owner, record_type) DO NOTHING;
                    SELECT zn.zone_id, pg_advisory_xact_lock(\(ProtectionSchema.commitLockClass), \(lockKey("zn")))::text
                    INTO zone_number, lock_taken FROM magicmirror.zones zn
                    WHERE zn.scope = p_scope AND zn.owner = p_owner AND zn.record_type = p_record_type;
                END IF;
                IF zone_number IS NOT NULL THEN
                    SELECT zn.zone_id, zn.generation, zn.base_seq, zn.last_seq, zn.notify_key INTO z
                    FROM magicmirror.zones zn WHERE zn.zone_id = zone_number FOR UPDATE;
                    zone_locked := FOUND;
                END IF;
                IF NOT zone_locked THEN
                    RAISE EXCEPTION 'permission denied for this zone' USING ERRCODE = '42501';
                END IF;

                -- 2. A delete that rules target: the client's linked commit.
                IF true = ANY(p_deleted) THEN
                    rules_apply := EXISTS (
                        SELECT 1 FROM magicmirror.delete_rules d
                        WHERE d.scope = p_scope AND d.owner = p_owner AND d.target_type = p_record_type);
                END IF;
                IF rules_apply THEN
                    RETURN QUERY SELECT 'zone'::text, 'rules'::text, z.generation, z.base_seq, z.last_seq, NULL::int8,
                        NULL::int4, NULL::int8, NULL::bytea, NULL::boolean, NULL::int8, NULL::int8, NULL::text,
                        NULL::int8, NULL::int8, NULL::text, NULL::text;
                    RETURN;
                ELSE
                    -- 3. The stored records of the batch, read once: the plan (CommitPlan's
                    -- rules), and what the client needs of them to make the outcome.
                    SELECT count(*) FILTER (WHERE d.decision = 'conflict') AS conflicts,
                           count(*) FILTER (WHERE d.decision = 'store') AS stores,
                           coalesce(bool_or(d.decision = 'store' AND NOT d.deleted
                                            AND position('\\x2224617373657422'::bytea IN d.fields) > 0), false) AS refers,
                           array_agg(d.id) FILTER (WHERE d.decision = 'store') AS s_ids,
                           array_agg(d.next_version) FILTER (WHERE d.decision = 'store') AS s_versions,
                           array_agg(d.fields) FILTER (WHERE d.decision = 'store') AS s_fields,
                           array_agg(d.deleted) FILTER (WHERE d.decision = 'store') AS s_deleted,
                           array_agg(d.millis) FILTER (WHERE d.decision = 'store') AS s_millis,
                           array_agg(d.counter) FILTER (WHERE d.decision = 'store') AS s_counters,
                           array_agg(d.created_millis) FILTER (WHERE d.decision = 'store') AS s_created_millis,
                           array_agg(d.created_counter) FILTER (WHERE d.decision = 'store') AS s_created_counters,
                           array_agg(d.n) FILTER (WHERE d.r_version IS NOT NULL) AS t_n,
                           array_agg(d.r_version) FILTER (WHERE d.r_version IS NOT NULL) AS t_versions,
                           array_agg(CASE WHEN d.decision <> 'store' THEN d.r_fields END)
                               FILTER (WHERE d.r_version IS NOT NULL) AS t_fields,
                           array_agg(d.r_fields IS NULL) FILTER (WHERE d.r_version IS NOT NULL) AS t_deleted,
                           array_agg(d.r_millis) FILTER (WHERE d.r_version IS NOT NULL) AS t_millis,
                           array_agg(d.r_counter) FILTER (WHERE d.r_version IS NOT NULL) AS t_counters,
                           array_agg(d.r_writer) FILTER (WHERE d.r_version IS NOT NULL) AS t_writers,
                           array_agg(d.r_created_millis) FILTER (WHERE d.r_version IS NOT NULL) AS t_created_millis,
                           array_agg(d.r_created_counter) FILTER (WHERE d.r_version IS NOT NULL) AS t_created_counters
                    INTO batch
                    FROM (
                        SELECT o.n, o.id, o.fields, o.deleted, o.millis, o.counter,
                               r.version AS r_version, r.fields AS r_fields, r.modified_millis AS r_millis,
                               r.modified_counter AS r_counter, r.writer AS r_writer,
                               r.created_millis AS r_created_millis, r.created_counter AS r_created_counter,
                               CASE WHEN r.writer = p_writer AND r.modified_millis = o.millis
                                         AND r.modified_counter = o.counter THEN 'retry'
                                    WHEN coalesce(r.version, 0) <> o.base THEN 'conflict'
                                    ELSE 'store' END AS decision,
                               CASE WHEN coalesce(r.version, 0) < 9223372036854775807 THEN coalesce(r.version, 0) + 1
                                    ELSE r.version END AS next_version,
                               CASE WHEN r.fields IS NOT NULL THEN r.created_millis ELSE o.millis END AS created_millis,
                               CASE WHEN r.fields IS NOT NULL THEN r.created_counter ELSE o.counter END AS created_counter
                        FROM unnest(p_ids, p_bases, p_fields, p_deleted, p_millis, p_counters) WITH ORDINALITY
                            AS o(id, base, fields, deleted, millis, counter, n)
                        \(stored)) d;

                    IF batch.conflicts > 0 THEN
                        status := 'refused';
                    ELSIF batch.stores = 0 THEN
                        status := 'applied';
                    ELSE
                        -- 4. The assets the records refer to (only fields with the bytes
                        -- "$asset" are parsed): every one a digest, every one in the zone.
                        IF batch.refers THEN
                            SELECT array_agg(f.id), array_agg(v) INTO refs_ids, refs_values
                            FROM unnest(batch.s_ids, batch.s_fields, batch.s_deleted) AS f(id, fields, deleted),
                                 LATERAL jsonb_path_query(convert_from(f.fields, 'UTF8')::jsonb, 'strict $.**."$asset"') AS v
                            WHERE NOT f.deleted AND position('\\x2224617373657422'::bytea IN f.fields) > 0;
                            SELECT ARRAY[x.id], ARRAY[x.v::text] INTO problem_ids, problem_values
                            FROM unnest(refs_ids, refs_values) AS x(id, v)
                            WHERE jsonb_typeof(x.v) <> 'string' OR (x.v #>> '{}') !~ '^[0-9a-f]{64}$'
                            LIMIT 1;
                            IF problem_ids IS NOT NULL THEN
                                status := 'invalid';
                            ELSE
                                SELECT array_agg(m.id), array_agg(m.digest) INTO problem_ids, problem_values
                                FROM (SELECT DISTINCT x.id, x.v #>> '{}' AS digest FROM unnest(refs_ids, refs_values) AS x(id, v)
                                      WHERE NOT EXISTS (SELECT 1 FROM magicmirror.assets a
                                                        WHERE a.zone_id = z.zone_id AND a.digest = x.v #>> '{}')) m;
                                IF problem_ids IS NOT NULL THEN
                                    status := 'missing';
                                END IF;
                            END IF;
                        END IF;

                        -- 5. One change: its number, the zone's sequence and the records in
                        -- one statement, the holds, then the NOTIFY.
                        IF status IS NULL THEN
                            drawn := nextval('magicmirror.change_seq');
                            \(moveFirst)INSERT INTO magicmirror.records AS rec
                                (zone_id, scope, owner, id, version, fields, modified_millis, modified_counter, writer,
                                 seq, created_millis, created_counter)
                            SELECT z.zone_id, p_scope, p_owner, w.id, w.version,
                                   CASE WHEN w.deleted THEN NULL ELSE w.fields END, w.millis, w.counter, p_writer, drawn,
                                   w.created_millis, w.created_counter
                            FROM unnest(batch.s_ids, batch.s_versions, batch.s_fields, batch.s_deleted, batch.s_millis,
                                        batch.s_counters, batch.s_created_millis, batch.s_created_counters)
                                AS w(id, version, fields, deleted, millis, counter, created_millis, created_counter)
                            ON CONFLICT (zone_id, id) DO UPDATE SET
                                version = EXCLUDED.version, fields = EXCLUDED.fields,
                                modified_millis = EXCLUDED.modified_millis, modified_counter = EXCLUDED.modified_counter,
                                writer = EXCLUDED.writer, seq = EXCLUDED.seq,
                                created_millis = EXCLUDED.created_millis, created_counter = EXCLUDED.created_counter\(moveAfter);
                            IF batch.refers THEN
                                DELETE FROM magicmirror.asset_holds h
                                WHERE h.zone_id = z.zone_id AND h.writer = p_writer
                                  AND h.digest IN (SELECT x.v #>> '{}' FROM unnest(refs_values) AS x(v));
                            END IF;
                            status := 'applied';
                        END IF;
                    END IF;
                END IF;

                -- The answer: the zone's row before the commit and what was done (with the
                -- change's NOTIFY, magicmirror.notification's text written out), the stored
                -- records of the batch, and what refused the commit.
                RETURN QUERY
                    SELECT 'zone'::text, status, z.generation, z.base_seq, z.last_seq, drawn, NULL::int4, NULL::int8,
                           NULL::bytea, NULL::boolean, NULL::int8, NULL::int8, NULL::text, NULL::int8, NULL::int8,
                           NULL::text, CASE WHEN drawn IS NOT NULL THEN pg_notify('\(NotificationPayload.channel)',
                               drawn::text || ' ' || left(encode(sha256(convert_to(z.notify_key || ' ' || drawn::text,
                                                                                   'UTF8')), 'hex'), 32))::text END
                    UNION ALL
                    SELECT 'stored', NULL, NULL, NULL, NULL, NULL, t.n::int4, t.version, t.fields, t.deleted, t.millis,
                           t.counter, t.writer, t.created_millis, t.created_counter, NULL, NULL
                    FROM unnest(batch.t_n, batch.t_versions, batch.t_fields, batch.t_deleted, batch.t_millis,
                                batch.t_counters, batch.t_writers, batch.t_created_millis, batch.t_created_counters)
                        AS t(n, version, fields, deleted, millis, counter, writer, created_millis, created_counter)
                    UNION ALL
                    SELECT status, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                           x.id, x.value
                    FROM unnest(problem_ids, problem_values) AS x(id, value);
            END
            $fn$
            """)
    }
}
