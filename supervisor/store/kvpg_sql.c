/* kvpg_sql: the PostgreSQL store's schema, migrations and queries.
 *
 * Schema (version 1), every name prefixed gadgetd_ so that the store may
 * share a database:
 *
 *   gadgetd_schema (one boolean PK, version int)
 *       the one row saying which migrations ran; changed only under the
 *       transaction-level advisory lock KVPG_LOCK, so gadgetds that start
 *       together migrate one after the other.
 *   gadgetd_node (name text PK, first_seen, last_seen timestamptz)
 *       the gadgetd nodes (Node=) that use the store; last_seen is set at
 *       each connect.
 *   gadgetd_kv_ns (id bigint identity PK, gadget text, binding text,
 *                  keys bigint, bytes bigint, created_by text,
 *                  UNIQUE (gadget, binding))
 *       one namespace per gadget and kv binding, and its usage (keys and
 *       bytes of keys + values) for MaxKeys= and MaxBytes=. Every write
 *       locks its namespace's row (FOR UPDATE) first, so two writes of a
 *       binding are serialised and the quota check cannot race.
 *   gadgetd_kv (ns bigint → gadgetd_kv_ns, key bytea (1..512 bytes),
 *               value bytea, PK (ns, key))
 *       the keys; list is a range of the primary key's index (bytea
 *       compares bytewise, as SQLite's BLOBs do).
 *   gadgetd_kv_put(gadget, binding, key, value, max_keys, max_bytes, node)
 *       → 0 stored, 1 over the quota (nothing written);
 *   gadgetd_kv_delete(gadget, binding, key) → whether the key existed.
 *       Every write goes through these two functions, in the statement's
 *       own transaction (one statement, then Sync: the commit).
 *
 * Version 2, one owner per gadget across the nodes (kvpg_lease.c):
 *
 *   gadgetd_owner (gadget text PK, node text, epoch bigint, since)
 *       the node that last took the gadget's lease, and how many times it
 *       was taken; changed only by gadgetd_lease_take, by the holder of
 *       the gadget's session advisory lock (KVPG_LEASE_SPACE, hashtext).
 *   gadgetd_lease_take(gadget, node, take) → (got, free, node, epoch)
 *       take: tries the lock; if got, bumps the epoch and names node. A
 *       write in flight holds the owner row (FOR SHARE): the bump waits
 *       for it at most KVPG_LEASE_LOCK_WAIT, then gives the lock back and
 *       says "free, not got", and the node tries again at its next poll.
 *       Why not wait longer: the lease session's 2 s answer deadline
 *       would call a slow write a lost session, and the node would stand
 *       back while another took the lease.
 *       Not take: only says whether the lock is free (tried and given
 *       back at once), for a node that waits its turn (Nodes=).
 *   gadgetd_kv_put(…, node, epoch), gadgetd_kv_delete(…, epoch)
 *       replace version 1's: the owner row is read FOR SHARE first, and
 *       a writer whose epoch is not the row's is refused with SQLSTATE
 *       GDF01 (fenced) before anything is written. Why this fences: a
 *       takeover's epoch bump waits for the shared lock of every write
 *       in flight, so each write either commits before the new owner
 *       starts (which then reads it) or is refused.
 *
 * Version 3, the nodes' peer links and moves (kvpg_lease.c):
 *
 *   gadgetd_node.peer text
 *       where other nodes reach this one (PeerListen=, "" if none); the
 *       lease session sets it and last_seen every KVPG_LEASE_BEAT_MS.
 *   gadgetd_owner.move_to text, move_until timestamptz
 *       `gadgetctl move`: set by the owner before it stops the gadget and
 *       gives its lease back; until move_until, gadgetd_lease_take lets
 *       only move_to take it (the others only look), and a take clears
 *       both. gadgetd_lease_take is replaced by this version.
 *
 * Version 4, the audit records of every node (kvpg_audit.c):
 *
 *   gadgetd_audit (id bigint identity PK, gadget text, node text,
 *                  at timestamptz, line text), index (gadget, id)
 *       a copy of every line each node writes to its STATE_DIR/audit.log
 *       (the JSON text as it is, "node" in it), sent in batches; at is
 *       the record's own "time". Read by `gadgetctl audit` in id order
 *       (each node's lines in their order; nodes interleaved by the order
 *       their batches committed); since, in at and seq order (kvpg_audit.c). Rows older than [Audit] StoreKeepDays=
 *       are deleted by each node, hourly. Self-contained: it only adds.
 *
 * Version 5, alarm bindings (bind_alarm.c, alarms/alarms.c):
 *
 *   gadgetd_alarm (gadget, binding, id text COLLATE "C", at bigint,
 *                  due bigint, attempts int, payload bytea,
 *                  PK (gadget, binding, id)), index (gadget, binding, due)
 *       each alarm a gadget set: at is its time (ms since the epoch),
 *       due when its delivery is next tried (at, later after failures),
 *       payload a packed Value. list is a range of the primary key (ids
 *       in byte order: COLLATE "C"), the next due one a range of the index.
 *   gadgetd_alarm_set(gadget, binding, id, at, payload, max, epoch)
 *       → 0 set (replacing one of its id), 1 over MaxAlarms= (nothing
 *       written); the binding's sets take a transaction-level advisory
 *       lock ("alrm", hashtext(gadget/binding)) so the count and the
 *       insert cannot race.
 *   gadgetd_alarm_cancel(gadget, binding, id, epoch) → whether it existed;
 *   gadgetd_alarm_settle(gadget, binding, id, at, due, payload, retry, epoch)
 *       a delivery's end: retry < 0 deletes the alarm, else its due
 *       becomes retry and attempts grows; only if at, due and payload are
 *       still those delivered. Every write is fenced by gadgetd_fence, as
 *       kv writes are: only the lease's holder changes a gadget's alarms.
 *
 * Version 6, one statement per round for every lease a node waits for
 * (kvpg_lease.c):
 *
 *   gadgetd_lease_take_many(gadgets text[], take boolean[], node)
 *       → rows (gadget, got, free, owner, owner_epoch), one per gadget:
 *       gadgetd_lease_take for each (take[i] its take), in one statement,
 *       so that a node watching 10,000 gadgets asks the store a few times
 *       per poll instead of 10,000 times. The looks (take false) are one
 *       set query, their rows first; then the takes, in order. The owner
 *       rows are read by a join before the locks are tried; a take
 *       that got the lock re-checks a move on the row it updates (ON
 *       CONFLICT ... WHERE), so a move marked meanwhile is still obeyed.
 *       The lock wait of a take is KVPG_LEASE_LOCK_WAIT, as before; once
 *       the statement has run KVPG_LEASE_BATCH_BUDGET, the rest of the
 *       gadgets are left for the next poll (no row), so that it is
 *       answered within the lease session's deadline even when several
 *       takes each wait for a write in flight. The node sends at most
 *       KVPG_LEASE_BATCH gadgets per statement. Self-contained: it only
 *       adds (gadgetd_lease_take stays, for nodes of an earlier version
 *       sharing the store).
 *
 * Version 7, a full lock table (kvpg_lease.c):
 *
 *   gadgetd_node.leases bigint
 *       how many leases the node held at its last beat: the nodes hold at
 *       most half of the lock table's slots in leases between them, and
 *       each reads the others' counts to know its own share.
 *   gadgetd_lease_take_many, replaced with the same columns: every lease
 *       held is a session advisory lock, one entry of PostgreSQL's shared
 *       lock table (max_locks_per_transaction × (max_connections +
 *       max_prepared_transactions) entries, and what spare shared memory
 *       holds beyond). Where a lock cannot be tried because that table is
 *       full (SQLSTATE 53200), the gadget's row says free NULL (not known)
 *       instead of the statement failing: a failed statement would roll
 *       back the owner rows of the takes before it but keep their locks
 *       (session locks ignore a rollback), and those gadgets would stay
 *       locked by a session that does not know it holds them. A node of
 *       an earlier version reads NULL as not free.
 *
 * Versions 8 to 10, leases that cost O(nodes) (kvpg_lease.c; three
 * migrations only for the length of their texts, made together):
 *
 *   gadgetd_node.incarnation bigint, lease_until timestamptz,
 *   changes bigint
 *       the node's own lease: live while lease_until (the server's clock)
 *       has not passed. A node joins (gadgetd_lease_renew with incarnation
 *       0) only once its row's lease_until has passed: the incarnation is
 *       bumped and the lease runs for the TTL; then every round it renews
 *       it in ONE statement (lease_until = now() + TTL, only while its
 *       incarnation is unchanged and the lease unexpired). changes counts
 *       the node's releases, so that the others look again at the gadgets
 *       they saw it own only when it changed (a round costs O(nodes)).
 *   gadgetd_owner.node_inc bigint
 *       the owner's incarnation when it took the gadget (0: given back).
 *       A gadget's lease is live while node_inc is its node's incarnation
 *       and that node's lease is live: no lock of the server's per gadget,
 *       and none per node either.
 *   gadgetd_lease_take_nodes(gadgets, take, node, incarnation)
 *       → rows (gadget, got, free, owner, owner_epoch, owner_inc): looks
 *       in one set query; a take locks the owner row (waiting for writes
 *       in flight at most KVPG_LEASE_LOCK_WAIT_NODES), and takes it only
 *       if it was given back, is this node's, or its node's lease has
 *       expired (now() past lease_until), bumping that node's incarnation
 *       under its row's lock. Why the bump: a renewal of the dead node
 *       racing the take then fails on its incarnation (or, if it commits
 *       first, the take sees the lease live): a node that renewed never
 *       owns a gadget another took meanwhile.
 *   gadgetd_lease_release(gadgets, node, incarnation): node_inc 0 and the
 *       node's changes bumped.
 *   gadgetd_fence, replaced: a write is refused (GDF01) unless its epoch
 *       is the row's AND the row's node lease is live by the server's
 *       clock (clock_timestamp(), at the check). Why this still fences: a
 *       takeover locks the owner row (FOR UPDATE) after every write in
 *       flight holding it FOR SHARE, so each write commits before the new
 *       owner starts or is refused.
 *   gadgetd_lease_take and gadgetd_lease_take_many (advisory locks) are
 *       replaced by ones that refuse (SQLSTATE GDU08): a node of an
 *       earlier version takes no lease on this schema (upgrade every node
 *       together; its writes are fenced, having no node lease).
 *
 * Version 11, kv's cas and batches (bind_kv_batch.c):
 *
 *   gadgetd_kv_batch(gadget, binding, ops, max_keys, max_bytes, node,
 *                    epoch) → (failed int, why int, existed bigint, cur bytea)
 *       ops: the operations as kv_job.h packs them (flags, key, expect,
 *       value), carried out in order in one transaction, fenced first as
 *       a put is. All applied: failed -1, why 0, existed bit i whether
 *       op i's key was there. Else nothing is written (the operations run
 *       in a block whose exception rolls them back) and failed names the
 *       operation: why 1, its cas did not match (cur: its key's stored
 *       value, NULL if none); why 2, its write passed MaxKeys=/MaxBytes=
 *       (each write checked as a put alone, counting the earlier ones).
 *       Self-contained: it only adds.
 *
 * Version 12, an older node's gadgets left to it:
 *
 *   gadgetd_lease_take_nodes, replaced: a take of a row given back
 *       (node_inc 0) whose gadget's advisory lock (KVPG_LEASE_SPACE,
 *       hashtext) another session holds leaves it: a node of schema 7 or
 *       earlier still runs it. Without this, a node of this version that
 *       migrated a store under older nodes took and started their gadgets
 *       while they still ran them (two processes at once, the older one's
 *       writes fenced). The older node keeps the gadget until its session
 *       ends (it stops or is upgraded).
 *   gadgetd_fence, replaced: also takes a write of the row's epoch when
 *       the row was given back by a node that never had a node lease and
 *       that node's lease session ("gadgetd NODE lease") holds the
 *       gadget's advisory lock: an older node's writes to the gadgets it
 *       still holds. So during a rolling upgrade from schema 7 the older
 *       nodes keep serving what they hold; they take no new lease (GDU08)
 *       (docs/operating.md).
 *
 * Version 13, the audit copy keyed by node and sequence (kvpg_audit.c):
 *
 *   gadgetd_audit.seq bigint (NULL allowed), and a unique index on
 *       (node, seq): each node numbers its records ("seq" in audit.log,
 *       kept across restarts) and sends them with ON CONFLICT DO NOTHING,
 *       so a batch sent twice (its answer lost after it committed, or a
 *       catch-up from audit.log overlapping the queue) lands once, and a
 *       node asks max(seq) of its rows to know where its copy stops. A
 *       node of schema 12 inserts rows without seq: NULLs never conflict,
 *       so they still insert, as before.
 *
 * Version 14, a dead node's leases end with its session (kvpg_lease.h):
 *
 *   gadgetd_node.lease_pid integer, lease_started, lease_server timestamptz
 *       the lease session of the node's last renewal: its backend's pid
 *       and start, and the server's own start; pid 0: none said.
 *   gadgetd_session_gone(pid, started, server) → whether this very
 *       server runs no backend of that pid and start.
 *   gadgetd_lease_renew(…, p_session, p_fresh boolean): records the
 *       session when p_session (a node of this version), lets a new
 *       process (p_fresh) join once its last session is gone; reads a
 *       node whose session
 *       is gone as not live. Version 8's (six arguments) stays for nodes
 *       of schema 12 and records none (their leases last their TTL).
 *   gadgetd_lease_take_nodes, replaced: a node whose session is gone is
 *       dead as one whose lease expired (its incarnation bumped under its
 *       row's lock: the fence refuses its writes from then).
 *
 * Version 16, a store newer than a node (kvpg.c setup_migrate):
 *
 *   gadgetd_schema.compatible integer (NULL: as version)
 *       the oldest schema whose nodes may still use the store: the
 *       greatest floor of the migrations applied (each migration's floor
 *       is written beside it in the list at the end of this file). A node
 *       of schema 16 or later whose schema is older than version but not
 *       older than compatible uses the store as its own version, without
 *       migrating it (a rolling upgrade: an older node that reconnects
 *       keeps serving); one older than compatible is refused, by each of
 *       its connections (kv, lease, audit, releases) as it connects,
 *       so that it takes no lease it could not serve. Nodes of
 *       schema 12 to 15 do not read it (they refuse any newer store), and
 *       they read gadgetd_schema only by its column version, which this
 *       leaves as it was: it only adds. */
#include "kvpg_sql.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* How long a takeover's epoch bump waits for a write in flight. */
#define KVPG_LEASE_LOCK_WAIT "500ms"
/* How long a statement of gadgetd_lease_take_many starts takes: with one
 * more lock wait, well within KVPG_LEASE_TIMEOUT_MS (2 s). */
#define KVPG_LEASE_BATCH_BUDGET "1000ms"

/* Version 8's: a take waits this long for a write in flight, and its
 * statement starts takes for at most this long, so that the round's next
 * renewal is sent well within the node's lease (KVPG_LEASE_VALID_MS). */
#define KVPG_LEASE_LOCK_WAIT_NODES "200ms"
#define KVPG_LEASE_BUDGET_NODES "200ms"

/* Any constant held by every gadgetd of this program: "gadgetd" in hex. */
#define KVPG_LOCK "6761646765746400"

const char kvpg_sql_replication[] =
        "SELECT current_setting('synchronous_standby_names'), (SELECT count(*) FROM pg_stat_replication)";

const char kvpg_sql_migrate_begin[] =
        "BEGIN;"
        "SELECT pg_advisory_xact_lock(x'" KVPG_LOCK "'::bigint);"
        "CREATE TABLE IF NOT EXISTS gadgetd_schema ("
        " one boolean PRIMARY KEY DEFAULT true CHECK (one), version integer NOT NULL);"
        "INSERT INTO gadgetd_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM gadgetd_schema);"
        KVPG_SQL_SCHEMA ";";

/* Text two migrations share, once each. A released migration's text must
 * never change (a store migrated by it is never migrated again): these
 * too are as they were released.
 * gadgetd_kv_put's body after its BEGIN (version 1) or its fence (2). */
#define KV_PUT_BODY \
        "  SELECT * INTO n FROM gadgetd_kv_ns WHERE gadget = p_gadget AND binding = p_binding FOR UPDATE;\n" \
        "  IF NOT FOUND THEN\n" \
        "    INSERT INTO gadgetd_kv_ns (gadget, binding, created_by) VALUES (p_gadget, p_binding, p_node)\n" \
        "      ON CONFLICT (gadget, binding) DO NOTHING;\n" \
        "    SELECT * INTO n FROM gadgetd_kv_ns WHERE gadget = p_gadget AND binding = p_binding FOR UPDATE;\n" \
        "  END IF;\n" \
        "  SELECT length(key) + length(value) INTO old FROM gadgetd_kv WHERE ns = n.id AND key = p_key;\n" \
        "  IF old IS NULL THEN dk := 1; old := 0; END IF;\n" \
        "  db := length(p_key) + length(p_value) - old;\n" \
        "  IF n.keys + dk > p_max_keys OR n.bytes + db > p_max_bytes THEN RETURN 1; END IF;\n" \
        "  INSERT INTO gadgetd_kv (ns, key, value) VALUES (n.id, p_key, p_value)\n" \
        "    ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value;\n" \
        "  UPDATE gadgetd_kv_ns SET keys = keys + dk, bytes = bytes + db WHERE id = n.id;\n" \
        "  RETURN 0;\n" \
        "END $f$;"
/* gadgetd_kv_delete's, the same. */
#define KV_DELETE_BODY \
        "  SELECT id INTO nid FROM gadgetd_kv_ns WHERE gadget = p_gadget AND binding = p_binding FOR UPDATE;\n" \
        "  IF NOT FOUND THEN RETURN false; END IF;\n" \
        "  DELETE FROM gadgetd_kv WHERE ns = nid AND key = p_key RETURNING length(key) + length(value) INTO freed;\n" \
        "  IF NOT FOUND THEN RETURN false; END IF;\n" \
        "  UPDATE gadgetd_kv_ns SET keys = keys - 1, bytes = bytes - freed WHERE id = nid;\n" \
        "  RETURN true;\n" \
        "END $f$;"
/* gadgetd_lease_take's take and answer, once p_take is decided; set: what
 * else a take sets on the owner row. */
#define LEASE_TAKE_BODY(set) \
        "  IF pg_try_advisory_lock(" KVPG_LEASE_SPACE ", hashtext(p_gadget)) THEN\n" \
        "    IF p_take THEN\n" \
        "      BEGIN\n" \
        "        PERFORM set_config('lock_timeout', '" KVPG_LEASE_LOCK_WAIT "', true);\n" \
        "        INSERT INTO gadgetd_owner (gadget, node, epoch) VALUES (p_gadget, p_node, 1)\n" \
        "          ON CONFLICT (gadget) DO UPDATE SET node = excluded.node,\n" \
        "            epoch = gadgetd_owner.epoch + 1, since = now()" set ";\n" \
        "        got := true;\n" \
        "      EXCEPTION WHEN lock_not_available THEN\n" \
        "        PERFORM pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(p_gadget));\n" \
        "        free := true;\n" \
        "      END;\n" \
        "    ELSE\n" \
        "      PERFORM pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(p_gadget));\n" \
        "      free := true;\n" \
        "    END IF;\n" \
        "  END IF;\n" \
        "  SELECT o.node, o.epoch INTO owner, owner_epoch FROM gadgetd_owner o WHERE o.gadget = p_gadget;\n" \
        "END $f$;"

static const char migration_1[] =
        "CREATE TABLE gadgetd_node ("
        " name text PRIMARY KEY,"
        " first_seen timestamptz NOT NULL DEFAULT now(),"
        " last_seen timestamptz NOT NULL DEFAULT now());"
        "CREATE TABLE gadgetd_kv_ns ("
        " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " gadget text NOT NULL,"
        " binding text NOT NULL,"
        " keys bigint NOT NULL DEFAULT 0,"
        " bytes bigint NOT NULL DEFAULT 0,"
        " created_by text NOT NULL,"
        " UNIQUE (gadget, binding));"
        "CREATE TABLE gadgetd_kv ("
        " ns bigint NOT NULL REFERENCES gadgetd_kv_ns (id),"
        " key bytea NOT NULL CHECK (length(key) BETWEEN 1 AND 512),"
        " value bytea NOT NULL,"
        " PRIMARY KEY (ns, key));"
        /* The namespace's row is locked before anything is read: the
         * quota check and the write see every earlier write of the
         * binding, and no later one until this commits. */
        "CREATE FUNCTION gadgetd_kv_put(p_gadget text, p_binding text, p_key bytea, p_value bytea,"
        " p_max_keys bigint, p_max_bytes bigint, p_node text) RETURNS integer LANGUAGE plpgsql AS $f$\n"
        "DECLARE n gadgetd_kv_ns%ROWTYPE; old bigint; dk bigint := 0; db bigint;\n"
        "BEGIN\n"
        KV_PUT_BODY
        "CREATE FUNCTION gadgetd_kv_delete(p_gadget text, p_binding text, p_key bytea)"
        " RETURNS boolean LANGUAGE plpgsql AS $f$\n"
        "DECLARE nid bigint; freed bigint;\n"
        "BEGIN\n"
        KV_DELETE_BODY;

static const char migration_2[] =
        "CREATE TABLE gadgetd_owner ("
        " gadget text PRIMARY KEY,"
        " node text NOT NULL,"
        " epoch bigint NOT NULL,"
        " since timestamptz NOT NULL DEFAULT now());"
        "CREATE FUNCTION gadgetd_lease_take(p_gadget text, p_node text, p_take boolean,"
        " OUT got boolean, OUT free boolean, OUT owner text, OUT owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  got := false; free := false;\n"
        LEASE_TAKE_BODY("")
        "DROP FUNCTION gadgetd_kv_put(text, text, bytea, bytea, bigint, bigint, text);"
        "DROP FUNCTION gadgetd_kv_delete(text, text, bytea);"
        "CREATE FUNCTION gadgetd_fence(p_gadget text, p_epoch bigint) RETURNS void LANGUAGE plpgsql AS $f$\n"
        "DECLARE e bigint;\n"
        "BEGIN\n"
        "  SELECT epoch INTO e FROM gadgetd_owner WHERE gadget = p_gadget FOR SHARE;\n"
        "  IF e IS DISTINCT FROM p_epoch THEN\n"
        "    RAISE EXCEPTION 'fenced: this node no longer owns gadget %', p_gadget USING ERRCODE = 'GDF01';\n"
        "  END IF;\n"
        "END $f$;"
        "CREATE FUNCTION gadgetd_kv_put(p_gadget text, p_binding text, p_key bytea, p_value bytea,"
        " p_max_keys bigint, p_max_bytes bigint, p_node text, p_epoch bigint) RETURNS integer LANGUAGE plpgsql AS $f$\n"
        "DECLARE n gadgetd_kv_ns%ROWTYPE; old bigint; dk bigint := 0; db bigint;\n"
        "BEGIN\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        KV_PUT_BODY
        "CREATE FUNCTION gadgetd_kv_delete(p_gadget text, p_binding text, p_key bytea, p_epoch bigint)"
        " RETURNS boolean LANGUAGE plpgsql AS $f$\n"
        "DECLARE nid bigint; freed bigint;\n"
        "BEGIN\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        KV_DELETE_BODY;

/* A node's peer address beside its name; a move's target on the owner
 * row: while move_until has not passed, only move_to may take the lease. */
static const char migration_3[] =
        "ALTER TABLE gadgetd_node ADD COLUMN peer text NOT NULL DEFAULT '';"
        "ALTER TABLE gadgetd_owner ADD COLUMN move_to text, ADD COLUMN move_until timestamptz;"
        "CREATE OR REPLACE FUNCTION gadgetd_lease_take(p_gadget text, p_node text, p_take boolean,"
        " OUT got boolean, OUT free boolean, OUT owner text, OUT owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  got := false; free := false;\n"
        "  IF p_take AND EXISTS (SELECT 1 FROM gadgetd_owner o WHERE o.gadget = p_gadget\n"
        "      AND o.move_to IS DISTINCT FROM p_node AND o.move_until > now()) THEN\n"
        "    p_take := false;\n"
        "  END IF;\n"
        LEASE_TAKE_BODY(", move_to = NULL, move_until = NULL");

/* Every wanted lease of a round in one statement (see the top). Why
 * #variable_conflict use_column: the result's columns share the table's
 * names (gadget, owner), and in SQL text the table's are meant. */
static const char migration_lease_batch[] =
        "CREATE FUNCTION gadgetd_lease_take_many(p_gadgets text[], p_take boolean[], p_node text)"
        " RETURNS TABLE (gadget text, got boolean, free boolean, owner text, owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE r record;\n"
        "BEGIN\n"
        /* The looks in one query: each lock tried and given back at once. */
        "  RETURN QUERY SELECT u.g, false, CASE WHEN pg_try_advisory_lock(" KVPG_LEASE_SPACE ", hashtext(u.g))\n"
        "      THEN pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(u.g)) ELSE false END, o.node, o.epoch\n"
        "    FROM unnest(p_gadgets, p_take) AS u (g, t) LEFT JOIN gadgetd_owner o ON o.gadget = u.g WHERE NOT u.t;\n"
        "  PERFORM set_config('lock_timeout', '" KVPG_LEASE_LOCK_WAIT "', true);\n"
        "  FOR r IN SELECT u.g, o.node, o.epoch FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i)\n"
        "      LEFT JOIN gadgetd_owner o ON o.gadget = u.g WHERE u.t ORDER BY u.i LOOP\n"
        "    EXIT WHEN clock_timestamp() - statement_timestamp() > interval '" KVPG_LEASE_BATCH_BUDGET "';\n"
        "    gadget := r.g; got := false; free := false; owner := r.node; owner_epoch := r.epoch;\n"
        "    IF pg_try_advisory_lock(" KVPG_LEASE_SPACE ", hashtext(r.g)) THEN\n"
        "      BEGIN\n"
        "        INSERT INTO gadgetd_owner AS o (gadget, node, epoch) VALUES (r.g, p_node, 1)\n"
        "          ON CONFLICT (gadget) DO UPDATE SET node = excluded.node, epoch = o.epoch + 1, since = now(),\n"
        "            move_to = NULL, move_until = NULL\n"
        "          WHERE o.move_until IS NULL OR o.move_until <= now() OR o.move_to = p_node\n"
        "          RETURNING o.node, o.epoch INTO owner, owner_epoch;\n"
        "        got := FOUND;\n"
        "      EXCEPTION WHEN lock_not_available THEN\n"
        "        got := false;\n"
        "      END;\n"
        "      IF NOT got THEN\n"
        "        PERFORM pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(r.g));\n"
        "        free := true;\n"
        "      END IF;\n"
        "    END IF;\n"
        "    RETURN NEXT;\n"
        "  END LOOP;\n"
        "END $f$;";

/* Version 7: gadgetd_lease_take_many again, its result's columns as
 * before, but a full lock table ends no statement (see the top). */
static const char migration_lease_full[] =
        "ALTER TABLE gadgetd_node ADD COLUMN leases bigint NOT NULL DEFAULT 0;"
        "CREATE OR REPLACE FUNCTION gadgetd_lease_take_many(p_gadgets text[], p_take boolean[], p_node text)"
        " RETURNS TABLE (gadget text, got boolean, free boolean, owner text, owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE r record; looks boolean[]; nodes text[]; epochs bigint[]; took boolean;\n"
        "BEGIN\n"
        /* The looks in one query (each lock tried and given back at once),
         * kept in arrays so that a full table leaves no half of their rows:
         * then every look says free NULL and no owner. */
        "  BEGIN\n"
        "    SELECT array_agg(CASE WHEN pg_try_advisory_lock(" KVPG_LEASE_SPACE ", hashtext(u.g))\n"
        "        THEN pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(u.g)) ELSE false END ORDER BY u.i),\n"
        "        array_agg(o.node ORDER BY u.i), array_agg(o.epoch ORDER BY u.i)\n"
        "      INTO looks, nodes, epochs\n"
        "      FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i)\n"
        "      LEFT JOIN gadgetd_owner o ON o.gadget = u.g WHERE NOT u.t;\n"
        "  EXCEPTION WHEN out_of_memory THEN\n"
        "    looks := NULL; nodes := NULL; epochs := NULL;\n"
        "  END;\n"
        "  RETURN QUERY SELECT l.g, false, looks[l.k], nodes[l.k], epochs[l.k]\n"
        "    FROM (SELECT u.g, row_number() OVER (ORDER BY u.i) AS k\n"
        "          FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i) WHERE NOT u.t) AS l ORDER BY l.k;\n"
        "  PERFORM set_config('lock_timeout', '" KVPG_LEASE_LOCK_WAIT "', true);\n"
        "  FOR r IN SELECT u.g, o.node, o.epoch FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i)\n"
        "      LEFT JOIN gadgetd_owner o ON o.gadget = u.g WHERE u.t ORDER BY u.i LOOP\n"
        "    EXIT WHEN clock_timestamp() - statement_timestamp() > interval '" KVPG_LEASE_BATCH_BUDGET "';\n"
        "    gadget := r.g; got := false; free := false; owner := r.node; owner_epoch := r.epoch; took := false;\n"
        /* A full table fails the lock, or the write's own transaction id
         * after it: either way this gadget's row says so, and a lock got
         * is given back, so no statement fails with a lock held. */
        "    BEGIN\n"
        "      took := pg_try_advisory_lock(" KVPG_LEASE_SPACE ", hashtext(r.g));\n"
        "      IF took THEN\n"
        "        BEGIN\n"
        "          INSERT INTO gadgetd_owner AS o (gadget, node, epoch) VALUES (r.g, p_node, 1)\n"
        "            ON CONFLICT (gadget) DO UPDATE SET node = excluded.node, epoch = o.epoch + 1, since = now(),\n"
        "              move_to = NULL, move_until = NULL\n"
        "            WHERE o.move_until IS NULL OR o.move_until <= now() OR o.move_to = p_node\n"
        "            RETURNING o.node, o.epoch INTO owner, owner_epoch;\n"
        "          got := FOUND;\n"
        "        EXCEPTION WHEN lock_not_available THEN\n"
        "          got := false;\n"
        "        END;\n"
        "      END IF;\n"
        "    EXCEPTION WHEN out_of_memory THEN\n"
        "      got := false; free := NULL; owner := r.node; owner_epoch := r.epoch;\n"
        "    END;\n"
        "    IF took AND NOT got THEN\n"
        "      PERFORM pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(r.g));\n"
        "      free := CASE WHEN free IS NULL THEN NULL ELSE true END;\n"
        "    END IF;\n"
        "    RETURN NEXT;\n"
        "  END LOOP;\n"
        "END $f$;";

/* Version 8: node leases (see the top). Why #variable_conflict
 * use_column: the results' columns share the tables' names. */
#define OWNER_FREE "o.gadget IS NULL OR o.node_inc = 0 OR n.name IS NULL OR n.incarnation <> o.node_inc" \
        " OR n.lease_until <= now()"
static const char migration_node_leases[] =
        "ALTER TABLE gadgetd_node ADD COLUMN incarnation bigint NOT NULL DEFAULT 0,"
        " ADD COLUMN lease_until timestamptz NOT NULL DEFAULT '-infinity',"
        " ADD COLUMN changes bigint NOT NULL DEFAULT 0;"
        "ALTER TABLE gadgetd_owner ADD COLUMN node_inc bigint NOT NULL DEFAULT 0;"
        "CREATE OR REPLACE FUNCTION gadgetd_lease_take(p_gadget text, p_node text, p_take boolean,"
        " OUT got boolean, OUT free boolean, OUT owner text, OUT owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  RAISE EXCEPTION 'the store has node leases (schema 8): upgrade gadgetd on node %', p_node"
        " USING ERRCODE = 'GDU08';\n"
        "END $f$;"
        "CREATE OR REPLACE FUNCTION gadgetd_lease_take_many(p_gadgets text[], p_take boolean[], p_node text)"
        " RETURNS TABLE (gadget text, got boolean, free boolean, owner text, owner_epoch bigint)"
        " LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  RAISE EXCEPTION 'the store has node leases (schema 8): upgrade gadgetd on node %', p_node"
        " USING ERRCODE = 'GDU08';\n"
        "END $f$;";
/* Versions 9 and 10: the rest of it (a string literal each, of a length
 * every compiler takes). */
static const char migration_node_renew[] =
        "CREATE OR REPLACE FUNCTION gadgetd_fence(p_gadget text, p_epoch bigint) RETURNS void LANGUAGE plpgsql AS $f$\n"
        "DECLARE o gadgetd_owner%ROWTYPE;\n"
        "BEGIN\n"
        "  SELECT * INTO o FROM gadgetd_owner WHERE gadget = p_gadget FOR SHARE;\n"
        "  IF o.epoch IS DISTINCT FROM p_epoch OR o.node_inc = 0 OR NOT EXISTS (SELECT 1 FROM gadgetd_node n\n"
        "      WHERE n.name = o.node AND n.incarnation = o.node_inc AND n.lease_until > clock_timestamp()) THEN\n"
        "    RAISE EXCEPTION 'fenced: this node no longer owns gadget %', p_gadget USING ERRCODE = 'GDF01';\n"
        "  END IF;\n"
        "END $f$;"
        /* The node's one statement per round: join (p_inc 0) or renew,
         * forget the nodes unseen for p_forget_ms, read every node. */
        "CREATE FUNCTION gadgetd_lease_renew(p_node text, p_peer text, p_inc bigint, p_leases bigint,"
        " p_ttl_ms bigint, p_forget_ms bigint)"
        " RETURNS TABLE (name text, peer text, age_ms bigint, leases bigint, incarnation bigint, live boolean,"
        " changes bigint) LANGUAGE plpgsql AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE inc bigint;\n"
        "BEGIN\n"
        "  IF p_inc > 0 THEN\n"
        "    UPDATE gadgetd_node n SET lease_until = now() + p_ttl_ms * interval '1 millisecond', last_seen = now(),\n"
        "        peer = p_peer, leases = p_leases\n"
        "      WHERE n.name = p_node AND n.incarnation = p_inc AND n.lease_until > now() RETURNING n.incarnation INTO inc;\n"
        "  ELSE\n"
        "    INSERT INTO gadgetd_node (name, peer) VALUES (p_node, p_peer) ON CONFLICT (name) DO NOTHING;\n"
        "    UPDATE gadgetd_node n SET incarnation = n.incarnation + 1,\n"
        "        lease_until = now() + p_ttl_ms * interval '1 millisecond', last_seen = now(), peer = p_peer, leases = 0\n"
        "      WHERE n.name = p_node AND n.lease_until <= now() RETURNING n.incarnation INTO inc;\n"
        "  END IF;\n"
        "  IF inc IS NULL THEN\n"
        "    UPDATE gadgetd_node n SET last_seen = now(), peer = p_peer WHERE n.name = p_node;\n"
        "  END IF;\n"
        "  DELETE FROM gadgetd_node n WHERE n.name <> p_node AND n.last_seen < now() - p_forget_ms * interval '1 millisecond';\n"
        "  RETURN QUERY SELECT n.name, n.peer,\n"
        "      CASE WHEN n.name = p_node THEN 0 ELSE (extract(epoch FROM now() - n.last_seen) * 1000)::bigint END,\n"
        "      n.leases, CASE WHEN n.name = p_node THEN coalesce(inc, 0) ELSE n.incarnation END,\n"
        "      n.lease_until > now(), n.changes\n"
        "    FROM (SELECT * FROM gadgetd_node x ORDER BY x.name <> p_node, x.name LIMIT 256) AS n ORDER BY n.name;\n"
        "END $f$;"
        "CREATE FUNCTION gadgetd_lease_release(p_gadgets text[], p_node text, p_inc bigint) RETURNS bigint"
        " LANGUAGE plpgsql AS $f$\n"
        "DECLARE k bigint;\n"
        "BEGIN\n"
        "  UPDATE gadgetd_owner SET node_inc = 0 WHERE gadget = ANY (p_gadgets) AND node = p_node AND node_inc = p_inc;\n"
        "  GET DIAGNOSTICS k = ROW_COUNT;\n"
        "  UPDATE gadgetd_node SET changes = changes + 1 WHERE name = p_node;\n"
        "  RETURN k;\n"
        "END $f$;";
/* gadgetd_lease_take_nodes (after CREATE or CREATE OR REPLACE): a take's
 * test of whether the row is free, and the bump of a dead node, is FREE. */
#define NODE_TAKES(FREE) NODE_TAKES_AS(FREE, OWNER_FREE, "n.lease_until <= now()")
/* The same, a dead node's test (LOOK_FREE for the looks, EXPIRED for the
 * bump) given too. */
#define NODE_TAKES_AS(FREE, LOOK_FREE, EXPIRED) \
        "FUNCTION gadgetd_lease_take_nodes(p_gadgets text[], p_take boolean[], p_node text, p_inc bigint)" \
        " RETURNS TABLE (gadget text, got boolean, free boolean, owner text, owner_epoch bigint, owner_inc bigint)" \
        " LANGUAGE plpgsql AS $f$\n" \
        "#variable_conflict use_column\n" \
        "DECLARE r record; o gadgetd_owner%ROWTYPE; live boolean;\n" \
        "BEGIN\n" \
        "  live := EXISTS (SELECT 1 FROM gadgetd_node n WHERE n.name = p_node AND n.incarnation = p_inc\n" \
        "      AND n.lease_until > now());\n" \
        /* The looks (and every take of a node without a live lease). */ \
        "  RETURN QUERY SELECT u.g, false, " LOOK_FREE ", o.node, o.epoch, o.node_inc\n" \
        "    FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i)\n" \
        "    LEFT JOIN gadgetd_owner o ON o.gadget = u.g LEFT JOIN gadgetd_node n ON n.name = o.node\n" \
        "    WHERE NOT u.t OR NOT live ORDER BY u.i;\n" \
        "  IF NOT live THEN RETURN; END IF;\n" \
        "  PERFORM set_config('lock_timeout', '" KVPG_LEASE_LOCK_WAIT_NODES "', true);\n" \
        "  FOR r IN SELECT u.g FROM unnest(p_gadgets, p_take) WITH ORDINALITY AS u (g, t, i) WHERE u.t ORDER BY u.i LOOP\n" \
        "    EXIT WHEN clock_timestamp() - statement_timestamp() > interval '" KVPG_LEASE_BUDGET_NODES "';\n" \
        "    gadget := r.g; got := false; free := false; owner := NULL; owner_epoch := NULL; owner_inc := NULL;\n" \
        "    BEGIN\n" \
        "      SELECT * INTO o FROM gadgetd_owner x WHERE x.gadget = r.g FOR UPDATE;\n" \
        "      IF FOUND THEN\n" \
        "        owner := o.node; owner_epoch := o.epoch; owner_inc := o.node_inc;\n" \
        FREE \
        "          UPDATE gadgetd_node n SET incarnation = n.incarnation + 1\n" \
        "            WHERE n.name = o.node AND n.incarnation = o.node_inc AND " EXPIRED ";\n" \
        "          free := FOUND OR NOT EXISTS (SELECT 1 FROM gadgetd_node n WHERE n.name = o.node\n" \
        "              AND n.incarnation = o.node_inc);\n" \
        "        END IF;\n" \
        "        IF free AND (o.move_until IS NULL OR o.move_until <= now() OR o.move_to = p_node) THEN\n" \
        "          UPDATE gadgetd_owner x SET node = p_node, node_inc = p_inc, epoch = x.epoch + 1, since = now(),\n" \
        "              move_to = NULL, move_until = NULL\n" \
        "            WHERE x.gadget = r.g RETURNING x.node, x.epoch, x.node_inc INTO owner, owner_epoch, owner_inc;\n" \
        "          got := true;\n" \
        "        END IF;\n" \
        "      ELSE\n" \
        "        INSERT INTO gadgetd_owner AS x (gadget, node, epoch, node_inc) VALUES (r.g, p_node, 1, p_inc)\n" \
        "          ON CONFLICT (gadget) DO NOTHING RETURNING x.node, x.epoch, x.node_inc INTO owner, owner_epoch, owner_inc;\n" \
        "        got := FOUND; free := FOUND;\n" \
        "      END IF;\n" \
        "    EXCEPTION WHEN lock_not_available THEN\n" \
        "      got := false; free := true;\n" \
        "    END;\n" \
        "    RETURN NEXT;\n" \
        "  END LOOP;\n" \
        "END $f$;"
static const char migration_node_takes[] =
        "CREATE " NODE_TAKES("        free := o.node_inc = 0 OR (o.node = p_node AND o.node_inc = p_inc);\n"
                             "        IF NOT free THEN\n");

/* Version 12: a take leaves alone a gadget an older node (schema 7 or
 * earlier) still holds: its owner row, migrated, says node_inc 0 (given
 * back), but that node's lease session still holds the gadget's advisory
 * lock and its process runs the gadget. Why a try of the lock tells: only
 * schema 7's takes took these locks (from 8 on its functions refuse), and
 * a session's lock lasts as long as the session; the try is a
 * transaction's lock, let go at the statement's commit (one per take: the
 * lock table needs no slot per gadget). Why the row is then not a dead
 * node's to bump: the older node has no node lease (its row's incarnation
 * 0 and lease_until -infinity would read as expired). Only a row given
 * back by a node that never had a node lease (incarnation 0, or no row)
 * is tried: among nodes of this version no lock is ever taken, and while
 * older nodes run, one per take of their gadgets. */
#define OLDER_HELD_FREE \
        "        free := o.node_inc = 0 OR (o.node = p_node AND o.node_inc = p_inc);\n" \
        "        IF free AND o.node_inc = 0 AND NOT EXISTS (SELECT 1 FROM gadgetd_node n WHERE n.name = o.node\n" \
        "            AND n.incarnation > 0) THEN\n" \
        "          free := pg_try_advisory_xact_lock(" KVPG_LEASE_SPACE ", hashtext(r.g));\n" \
        "        END IF;\n" \
        "        IF NOT free AND o.node_inc <> 0 THEN\n"
static const char migration_older_held[] =
        "CREATE OR REPLACE " NODE_TAKES(OLDER_HELD_FREE)
        ";"
        /* The fence, replaced: the older owner's writes are taken while
         * its lease session holds the gadget's lock. Why this still
         * fences: that lock is the older node's lease (schema 7's own
         * fencing held the same way), the row is held FOR SHARE through
         * the write, and a take (FOR UPDATE) tries the lock only after
         * the write commits. The lock table is read only for such rows. */
        "CREATE OR REPLACE FUNCTION gadgetd_fence(p_gadget text, p_epoch bigint) RETURNS void LANGUAGE plpgsql AS $f$\n"
        "DECLARE o gadgetd_owner%ROWTYPE;\n"
        "BEGIN\n"
        "  SELECT * INTO o FROM gadgetd_owner WHERE gadget = p_gadget FOR SHARE;\n"
        "  IF o.epoch IS NOT DISTINCT FROM p_epoch THEN\n"
        "    IF o.node_inc <> 0 THEN\n"
        "      IF EXISTS (SELECT 1 FROM gadgetd_node n\n"
        "          WHERE n.name = o.node AND n.incarnation = o.node_inc AND n.lease_until > clock_timestamp()) THEN\n"
        "        RETURN;\n"
        "      END IF;\n"
        "    ELSIF NOT EXISTS (SELECT 1 FROM gadgetd_node n WHERE n.name = o.node AND n.incarnation > 0) THEN\n"
        "      IF EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid\n"
        "          WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2\n"
        "          AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())\n"
        "          AND l.classid = " KVPG_LEASE_SPACE "::bigint::oid\n"
        "          AND l.objid = (hashtext(p_gadget)::bigint & 4294967295)::oid\n"
        "          AND a.application_name = 'gadgetd ' || o.node || ' lease') THEN\n"
        "        RETURN;\n"
        "      END IF;\n"
        "    END IF;\n"
        "  END IF;\n"
        "  RAISE EXCEPTION 'fenced: this node no longer owns gadget %', p_gadget USING ERRCODE = 'GDF01';\n"
        "END $f$;";

/* Version 14: a node whose lease session ended is dead at once (see the
 * top). A session is named by its backend's pid, start and the server's
 * own start (pg_postmaster_start_time): gone only when this very server
 * runs no backend of that pid and start. Why the server's start: a
 * promoted standby (or a restarted server) knows none of the old server's
 * backends, and would read every node as dead while each still serves
 * until its lease's end. Why a backend of the pid whose start is hidden
 * (another role's, without pg_read_all_stats) counts as the session: a
 * reused pid then only means waiting for the TTL, never a node read as
 * dead while it lives. */
#define SESSION_GONE(n) "gadgetd_session_gone(" n ".lease_pid, " n ".lease_started, " n ".lease_server)"
static const char migration_session_gone[] =
        "ALTER TABLE gadgetd_node ADD COLUMN lease_pid integer NOT NULL DEFAULT 0,"
        " ADD COLUMN lease_started timestamptz, ADD COLUMN lease_server timestamptz;"
        "CREATE FUNCTION gadgetd_session_gone(p_pid integer, p_started timestamptz, p_server timestamptz)"
        " RETURNS boolean LANGUAGE sql STABLE AS $f$\n"
        "  SELECT p_pid <> 0 AND p_started IS NOT NULL AND p_server IS NOT DISTINCT FROM pg_postmaster_start_time()\n"
        "    AND NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(p_pid) a\n"
        "      WHERE a.pid = p_pid AND (a.backend_start IS NULL OR a.backend_start = p_started))\n"
        "$f$;"
        /* The renewal with p_session: whether this session's end may end
         * the node's lease (a node of this version, which stops serving
         * the moment its session ends and asked the server not to end it
         * over the network before its lease's end: kvpg_lease.c). With
         * p_fresh (the first join of a process) a join comes once the
         * last lease expired or its session is gone: a node restarted
         * after a crash joins at once, not after its TTL (why safe: as
         * for a take, the process that held that session is dead or ended
         * every lease when it ended). Why only a new process: one that
         * lost its session and lives waits out its lease as before, so
         * that a healthy node takes what it held first. */
        "CREATE FUNCTION gadgetd_lease_renew(p_node text, p_peer text, p_inc bigint, p_leases bigint,"
        " p_ttl_ms bigint, p_forget_ms bigint, p_session boolean, p_fresh boolean)"
        " RETURNS TABLE (name text, peer text, age_ms bigint, leases bigint, incarnation bigint, live boolean,"
        " changes bigint) LANGUAGE plpgsql AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE inc bigint; v_pid integer := 0; v_started timestamptz; v_server timestamptz;\n"
        "BEGIN\n"
        "  IF p_session THEN\n"
        "    v_pid := pg_backend_pid(); v_server := pg_postmaster_start_time();\n"
        "    SELECT a.backend_start INTO v_started FROM pg_stat_get_activity(v_pid) a WHERE a.pid = v_pid;\n"
        "  END IF;\n"
        "  IF p_inc > 0 THEN\n"
        "    UPDATE gadgetd_node n SET lease_until = now() + p_ttl_ms * interval '1 millisecond', last_seen = now(),\n"
        "        peer = p_peer, leases = p_leases, lease_pid = v_pid, lease_started = v_started, lease_server = v_server\n"
        "      WHERE n.name = p_node AND n.incarnation = p_inc AND n.lease_until > now() RETURNING n.incarnation INTO inc;\n"
        "  ELSE\n"
        "    INSERT INTO gadgetd_node (name, peer) VALUES (p_node, p_peer) ON CONFLICT (name) DO NOTHING;\n"
        "    UPDATE gadgetd_node n SET incarnation = n.incarnation + 1,\n"
        "        lease_until = now() + p_ttl_ms * interval '1 millisecond', last_seen = now(), peer = p_peer, leases = 0,\n"
        "        lease_pid = v_pid, lease_started = v_started, lease_server = v_server\n"
        "      WHERE n.name = p_node AND (n.lease_until <= now() OR (p_fresh AND " SESSION_GONE("n") "))\n"
        "      RETURNING n.incarnation INTO inc;\n"
        "  END IF;\n"
        "  IF inc IS NULL THEN\n"
        "    UPDATE gadgetd_node n SET last_seen = now(), peer = p_peer WHERE n.name = p_node;\n"
        "  END IF;\n"
        "  DELETE FROM gadgetd_node n WHERE n.name <> p_node\n"
        "    AND n.last_seen < now() - p_forget_ms * interval '1 millisecond';\n"
        "  RETURN QUERY SELECT n.name, n.peer,\n"
        "      CASE WHEN n.name = p_node THEN 0 ELSE (extract(epoch FROM now() - n.last_seen) * 1000)::bigint END,\n"
        "      n.leases, CASE WHEN n.name = p_node THEN coalesce(inc, 0) ELSE n.incarnation END,\n"
        "      n.lease_until > now() AND (n.name = p_node OR NOT " SESSION_GONE("n") "), n.changes\n"
        "    FROM (SELECT * FROM gadgetd_node x ORDER BY x.name <> p_node, x.name LIMIT 256) AS n ORDER BY n.name;\n"
        "END $f$;"
        /* Schema 12's renewal, kept for its nodes during a rolling
         * upgrade: their sessions never end their leases early (pid 0). */
        "CREATE OR REPLACE FUNCTION gadgetd_lease_renew(p_node text, p_peer text, p_inc bigint, p_leases bigint,"
        " p_ttl_ms bigint, p_forget_ms bigint)"
        " RETURNS TABLE (name text, peer text, age_ms bigint, leases bigint, incarnation bigint, live boolean,"
        " changes bigint) LANGUAGE sql AS $f$\n"
        "  SELECT * FROM gadgetd_lease_renew(p_node, p_peer, p_inc, p_leases, p_ttl_ms, p_forget_ms, false, false)\n"
        "$f$;";
/* The takes: a node whose session is gone is dead as one whose lease
 * expired (its incarnation bumped under its row's lock, which fences its
 * writes from then on). */
static const char migration_session_takes[] =
        "CREATE OR REPLACE " NODE_TAKES_AS(OLDER_HELD_FREE, OWNER_FREE " OR " SESSION_GONE("n"),
                                           "(n.lease_until <= now() OR " SESSION_GONE("n") ")")
        ";";
/* Version 14 whole: the two above, joined at the first use (one literal
 * would pass the length every compiler takes). */
static char migration_14[sizeof migration_session_gone + sizeof migration_session_takes - 1];

/* Version 11: a batch of kv operations in one transaction (see the top).
 * Why a malformed ops string cannot write: a length past the end makes
 * substring short and the check after each field raises, rolling back. */
static const char migration_kv_batch[] =
        "CREATE FUNCTION gadgetd_kv_batch(p_gadget text, p_binding text, p_ops bytea, p_max_keys bigint,"
        " p_max_bytes bigint, p_node text, p_epoch bigint,"
        " OUT failed integer, OUT why integer, OUT existed bigint, OUT cur bytea) LANGUAGE plpgsql AS $f$\n"
        "DECLARE n gadgetd_kv_ns%ROWTYPE; pos integer := 0; i integer := 0; flags integer; len integer;\n"
        "  k bytea; e bytea; v bytea; old bytea; nk bigint; nb bigint; total integer := length(p_ops);\n"
        "BEGIN\n"
        "  failed := -1; why := 0; existed := 0;\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        "  SELECT * INTO n FROM gadgetd_kv_ns WHERE gadget = p_gadget AND binding = p_binding FOR UPDATE;\n"
        "  IF NOT FOUND THEN\n"
        "    INSERT INTO gadgetd_kv_ns (gadget, binding, created_by) VALUES (p_gadget, p_binding, p_node)\n"
        "      ON CONFLICT (gadget, binding) DO NOTHING;\n"
        "    SELECT * INTO n FROM gadgetd_kv_ns WHERE gadget = p_gadget AND binding = p_binding FOR UPDATE;\n"
        "  END IF;\n"
        "  nk := n.keys; nb := n.bytes;\n"
        "  BEGIN\n"
        "    WHILE pos < total LOOP\n"
        "      IF i >= 64 OR total - pos < 11 THEN RAISE EXCEPTION 'malformed kv batch'; END IF;\n"
        "      flags := get_byte(p_ops, pos);\n"
        "      len := get_byte(p_ops, pos + 1) * 256 + get_byte(p_ops, pos + 2);\n"
        "      IF len < 1 OR total - pos - 11 < len THEN RAISE EXCEPTION 'malformed kv batch'; END IF;\n"
        "      k := substring(p_ops FROM pos + 4 FOR len); pos := pos + 3 + len;\n"
        "      len := (get_byte(p_ops, pos) << 24) | (get_byte(p_ops, pos + 1) << 16)\n"
        "        | (get_byte(p_ops, pos + 2) << 8) | get_byte(p_ops, pos + 3);\n"
        "      IF len < 0 OR total - pos - 8 < len THEN RAISE EXCEPTION 'malformed kv batch'; END IF;\n"
        "      e := substring(p_ops FROM pos + 5 FOR len); pos := pos + 4 + len;\n"
        "      len := (get_byte(p_ops, pos) << 24) | (get_byte(p_ops, pos + 1) << 16)\n"
        "        | (get_byte(p_ops, pos + 2) << 8) | get_byte(p_ops, pos + 3);\n"
        "      IF len < 0 OR total - pos - 4 < len THEN RAISE EXCEPTION 'malformed kv batch'; END IF;\n"
        "      v := substring(p_ops FROM pos + 5 FOR len); pos := pos + 4 + len;\n"
        "      IF flags & 2 = 0 THEN e := NULL; END IF;\n"
        "      IF flags & 4 = 0 THEN v := NULL; END IF;\n"
        "      old := NULL;\n"
        "      SELECT value INTO old FROM gadgetd_kv WHERE ns = n.id AND key = k;\n"
        "      IF flags & 1 = 1 AND old IS DISTINCT FROM e THEN\n"
        "        failed := i; why := 1; cur := old;\n"
        "        RAISE EXCEPTION USING ERRCODE = 'GDB01';\n"
        "      END IF;\n"
        "      IF old IS NOT NULL THEN existed := existed | (1::bigint << i); END IF;\n"
        "      IF v IS NULL THEN\n"
        "        IF old IS NOT NULL THEN\n"
        "          DELETE FROM gadgetd_kv WHERE ns = n.id AND key = k;\n"
        "          nk := nk - 1; nb := nb - length(k) - length(old);\n"
        "        END IF;\n"
        "      ELSE\n"
        "        IF old IS NULL THEN nk := nk + 1; ELSE nb := nb - length(k) - length(old); END IF;\n"
        "        nb := nb + length(k) + length(v);\n"
        "        IF nk > p_max_keys OR nb > p_max_bytes THEN\n"
        "          failed := i; why := 2;\n"
        "          RAISE EXCEPTION USING ERRCODE = 'GDB01';\n"
        "        END IF;\n"
        "        INSERT INTO gadgetd_kv (ns, key, value) VALUES (n.id, k, v)\n"
        "          ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value;\n"
        "      END IF;\n"
        "      i := i + 1;\n"
        "    END LOOP;\n"
        "    UPDATE gadgetd_kv_ns SET keys = nk, bytes = nb WHERE id = n.id;\n"
        "  EXCEPTION WHEN SQLSTATE 'GDB01' THEN\n"
        "    existed := 0;\n"
        "  END;\n"
        "END $f$;";

/* Self-contained (it only adds): its place in the list is KVPG_SCHEMA_AUDIT. */
static const char migration_audit[] =
        "CREATE TABLE gadgetd_audit ("
        " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " gadget text NOT NULL,"
        " node text NOT NULL,"
        " at timestamptz NOT NULL,"
        " line text NOT NULL);"
        "CREATE INDEX gadgetd_audit_gadget ON gadgetd_audit (gadget, id);"
        "CREATE INDEX gadgetd_audit_at ON gadgetd_audit (at);";

#define KVPG_ALARM_LOCK "1634496109" /* "alrm" in hex */

static const char migration_5[] =
        "CREATE TABLE gadgetd_alarm ("
        " gadget text NOT NULL,"
        " binding text NOT NULL,"
        " id text COLLATE \"C\" NOT NULL,"
        " at bigint NOT NULL,"
        " due bigint NOT NULL,"
        " attempts integer NOT NULL DEFAULT 0,"
        " payload bytea NOT NULL,"
        " PRIMARY KEY (gadget, binding, id));"
        "CREATE INDEX gadgetd_alarm_due ON gadgetd_alarm (gadget, binding, due, id);"
        "CREATE FUNCTION gadgetd_alarm_set(p_gadget text, p_binding text, p_id text, p_at bigint, p_payload bytea,"
        " p_max bigint, p_epoch bigint) RETURNS integer LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        "  PERFORM pg_advisory_xact_lock(" KVPG_ALARM_LOCK ", hashtext(p_gadget || '/' || p_binding));\n"
        "  IF (SELECT count(*) FROM gadgetd_alarm WHERE gadget = p_gadget AND binding = p_binding\n"
        "      AND id <> p_id) + 1 > p_max THEN RETURN 1; END IF;\n"
        "  INSERT INTO gadgetd_alarm (gadget, binding, id, at, due, payload)\n"
        "    VALUES (p_gadget, p_binding, p_id, p_at, p_at, p_payload)\n"
        "    ON CONFLICT (gadget, binding, id) DO UPDATE SET at = excluded.at, due = excluded.due,\n"
        "      attempts = 0, payload = excluded.payload;\n"
        "  RETURN 0;\n"
        "END $f$;"
        "CREATE FUNCTION gadgetd_alarm_cancel(p_gadget text, p_binding text, p_id text, p_epoch bigint)"
        " RETURNS boolean LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        "  DELETE FROM gadgetd_alarm WHERE gadget = p_gadget AND binding = p_binding AND id = p_id;\n"
        "  RETURN FOUND;\n"
        "END $f$;"
        "CREATE FUNCTION gadgetd_alarm_settle(p_gadget text, p_binding text, p_id text, p_at bigint, p_due bigint,"
        " p_payload bytea, p_retry bigint, p_epoch bigint) RETURNS boolean LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  PERFORM gadgetd_fence(p_gadget, p_epoch);\n"
        "  IF p_retry < 0 THEN\n"
        "    DELETE FROM gadgetd_alarm WHERE gadget = p_gadget AND binding = p_binding AND id = p_id\n"
        "      AND at = p_at AND due = p_due AND payload = p_payload;\n"
        "  ELSE\n"
        "    UPDATE gadgetd_alarm SET due = p_retry, attempts = attempts + 1 WHERE gadget = p_gadget\n"
        "      AND binding = p_binding AND id = p_id AND at = p_at AND due = p_due AND payload = p_payload;\n"
        "  END IF;\n"
        "  RETURN FOUND;\n"
        "END $f$;";

/* Version 13 (see the top). The index is built in the migration's
 * transaction: the table is locked while it is, so audit copies wait
 * (their queues hold the lines meanwhile); kv and leases do not. */
static const char migration_audit_seq[] =
        "ALTER TABLE gadgetd_audit ADD COLUMN seq bigint;"
        "CREATE UNIQUE INDEX gadgetd_audit_node_seq ON gadgetd_audit (node, seq);";

/* Version 15: the gadgets' releases in the store (control/deploy_store.c,
 * docs/releases.md "In a cluster"). Self-contained: it only adds, and a
 * node of schema 12 never reads these tables (it keeps its own store of
 * versions, as before).
 *
 *   gadgetd_release (gadget, version PK, seq, bundle bytea, signer,
 *                    installed_ms, uid, node)
 *       each bundle installed on any node, the bytes as that node
 *       received them (at most BUNDLE_SIZE_MAX): every other node reads
 *       it, checks its signature against its own TrustedKeys= and
 *       unpacks it into its own store; what another node says of it
 *       (signer, uid) is only shown, never trusted.
 *   gadgetd_release_state (gadget PK, gen, seq, current, previous,
 *                          rollout, percent, max_errors, min_calls, why,
 *                          node, at)
 *       each gadget's current version and running rollout; gen counts
 *       its changes, each made by gadgetd_release_set only if gen is
 *       still the writer's (a compare-and-set: two operators on two
 *       nodes cannot interleave); why says why the last automatic
 *       rollback went back.
 *   seq (gadgetd_release_seq): every insert and change takes the next
 *       one under the transaction lock KVPG_RELEASE_LOCK, so rows commit
 *       in the order of their seq and a node that polls "seq > the last
 *       it saw" misses none. */
static const char migration_releases[] =
        "CREATE SEQUENCE gadgetd_release_seq;"
        "CREATE TABLE gadgetd_release ("
        " gadget text NOT NULL,"
        " version text NOT NULL,"
        " seq bigint NOT NULL DEFAULT nextval('gadgetd_release_seq') UNIQUE,"
        " bundle bytea NOT NULL,"
        " signer text NOT NULL,"
        " installed_ms bigint NOT NULL,"
        " uid bigint NOT NULL,"
        " node text NOT NULL,"
        " PRIMARY KEY (gadget, version));"
        "CREATE TABLE gadgetd_release_state ("
        " gadget text PRIMARY KEY,"
        " gen bigint NOT NULL,"
        " seq bigint NOT NULL UNIQUE,"
        " current text NOT NULL,"
        " previous text NOT NULL,"
        " rollout text NOT NULL,"
        " percent integer NOT NULL,"
        " max_errors integer NOT NULL,"
        " min_calls bigint NOT NULL,"
        " why text NOT NULL,"
        " node text NOT NULL,"
        " at timestamptz NOT NULL DEFAULT now());"
        "CREATE FUNCTION gadgetd_release_add(p_gadget text, p_version text, p_bundle bytea, p_signer text,"
        " p_ms bigint, p_uid bigint, p_node text) RETURNS boolean LANGUAGE plpgsql AS $f$\n"
        "BEGIN\n"
        "  PERFORM pg_advisory_xact_lock(" KVPG_RELEASE_LOCK ");\n"
        "  INSERT INTO gadgetd_release (gadget, version, bundle, signer, installed_ms, uid, node)\n"
        "    VALUES (p_gadget, p_version, p_bundle, p_signer, p_ms, p_uid, p_node) ON CONFLICT DO NOTHING;\n"
        "  IF NOT FOUND THEN RETURN false; END IF;\n"
        "  PERFORM pg_notify('" KVPG_RELEASE_CHANNEL "', '');\n"
        "  RETURN true;\n"
        "END $f$;"
        "CREATE FUNCTION gadgetd_release_set(p_gadget text, p_gen bigint, p_current text, p_previous text,"
        " p_rollout text, p_percent integer, p_max_errors integer, p_min_calls bigint, p_why text, p_node text)"
        " RETURNS bigint LANGUAGE plpgsql AS $f$\n"
        "DECLARE g bigint;\n"
        "BEGIN\n"
        "  PERFORM pg_advisory_xact_lock(" KVPG_RELEASE_LOCK ");\n"
        "  IF p_gen = 0 THEN\n"
        "    INSERT INTO gadgetd_release_state (gadget, gen, seq, current, previous, rollout, percent, max_errors,\n"
        "        min_calls, why, node)\n"
        "      VALUES (p_gadget, 1, nextval('gadgetd_release_seq'), p_current, p_previous, p_rollout, p_percent,\n"
        "        p_max_errors, p_min_calls, p_why, p_node) ON CONFLICT DO NOTHING;\n"
        "    IF NOT FOUND THEN RETURN 0; END IF;\n"
        "    PERFORM pg_notify('" KVPG_RELEASE_CHANNEL "', '');\n"
        "    RETURN 1;\n"
        "  END IF;\n"
        "  UPDATE gadgetd_release_state SET gen = gen + 1, seq = nextval('gadgetd_release_seq'),\n"
        "      current = p_current, previous = p_previous, rollout = p_rollout, percent = p_percent,\n"
        "      max_errors = p_max_errors, min_calls = p_min_calls, why = p_why, node = p_node, at = now()\n"
        "    WHERE gadget = p_gadget AND gen = p_gen RETURNING gen INTO g;\n"
        "  IF g IS NOT NULL THEN PERFORM pg_notify('" KVPG_RELEASE_CHANNEL "', ''); END IF;\n"
        "  RETURN coalesce(g, 0);\n"
        "END $f$;";

/* Version 16 (see the top): nullable, so a row nobody set reads as its
 * version (no older node may use it). Its own floor is 12: it only adds. */
static const char migration_compatible[] = "ALTER TABLE gadgetd_schema ADD COLUMN compatible integer;";

/* The migrations in order: entry i takes the schema from version i to
 * i + 1, and their count is the version this gadgetd makes. A new one is
 * a new entry at the end (a new type's tables: its own migration).
 *
 * Beside each, its floor: the oldest schema whose nodes still work on a
 * store it migrated (during a rolling upgrade an older node that
 * reconnects uses the store as its own version if it is at least every
 * migration's floor). A migration that only adds (tables, columns that
 * may be NULL or have a default, functions beside the older ones) keeps
 * the floor before it; one that changes or drops what an older node
 * reads or calls, or whose fencing an older node's code would not obey,
 * raises it to its own version. Decide it for every new migration: a
 * floor too low lets an older node break the store. One that raises it
 * must also make the functions older nodes call refuse them (as version
 * 10 did, GDU08): a node checks the version only when each of its
 * connections is made, so one connected before the migration goes on
 * calling them until it reconnects. Those up to 12 were
 * released before any node could run beside a newer store: their floor
 * is their own version. */
static const struct {
        const char *sql;
        int floor;
} migrations[] = {
        { migration_1, 1 },             { migration_2, 2 },          { migration_3, 3 },
        { migration_audit, 4 },         { migration_5, 5 },          { migration_lease_batch, 6 },
        { migration_lease_full, 7 },    { migration_node_leases, 8 }, { migration_node_renew, 9 },
        { migration_node_takes, 10 },   { migration_kv_batch, 11 },  { migration_older_held, 12 },
        { migration_audit_seq, 12 },    { migration_14, 12 },        { migration_releases, 12 },
        { migration_compatible, 12 },
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof *migrations))

int kvpg_sql_version(void)
{
        return N_MIGRATIONS;
}

const char *kvpg_sql_migration(int version)
{
        if (!migration_14[0]) {
                memcpy(migration_14, migration_session_gone, sizeof migration_session_gone - 1);
                memcpy(migration_14 + sizeof migration_session_gone - 1, migration_session_takes,
                       sizeof migration_session_takes);
        }
        return version >= 1 && version <= N_MIGRATIONS ? migrations[version - 1].sql : NULL;
}

int kvpg_sql_compatible(int version)
{
        int floor = 0;
        for (int v = 1; v <= version && v <= N_MIGRATIONS; v++)
                if (migrations[v - 1].floor > floor)
                        floor = migrations[v - 1].floor;
        return floor;
}

int kvpg_sql_schema_check(int version, int compatible, char *why, size_t len)
{
        int ours = N_MIGRATIONS;
        if (version <= ours)
                return 0;
        if (compatible <= ours)
                return 1;
        snprintf(why, len, "the store's schema is version %d, which only nodes of schema %d or later may use; "
                 "this gadgetd's is %d: upgrade it to one of schema %d or later", version, compatible, ours,
                 compatible);
        return -1;
}

int kvpg_array_add(struct kvpg_array *a, const char *elem)
{
        /* Worst case: every byte escaped, two quotes, a comma, "}", NUL. */
        size_t need = a->len + 2 * strlen(elem) + 6;
        if (need > a->cap) {
                size_t cap = a->cap ? a->cap : 256;
                while (cap < need)
                        cap *= 2;
                char *text = realloc(a->text, cap);
                if (!text)
                        return -ENOMEM;
                a->text = text;
                a->cap = cap;
        }
        if (a->len == 0)
                a->text[a->len++] = '{';
        else
                a->text[a->len - 1] = ','; /* the closing brace */
        a->text[a->len++] = '"';
        for (const char *p = elem; *p; p++) {
                if (*p == '"' || *p == '\\')
                        a->text[a->len++] = '\\';
                a->text[a->len++] = *p;
        }
        a->text[a->len++] = '"';
        a->text[a->len++] = '}';
        a->text[a->len] = '\0';
        a->n++;
        return 0;
}

void kvpg_array_reset(struct kvpg_array *a)
{
        a->len = a->n = 0;
        if (a->text)
                a->text[0] = '\0';
}

void kvpg_array_free(struct kvpg_array *a)
{
        free(a->text);
        *a = (struct kvpg_array){ 0 };
}

/* Appends n bytes of s to out (room len, used *o), cut to fit. */
static void put(char *out, size_t len, size_t *o, const char *s, size_t n)
{
        while (n-- > 0 && *o + 1 < len)
                out[(*o)++] = *s++;
        out[*o] = '\0';
}

/* The key=value form: each password's value (plain, or quoted with
 * backslash escapes) becomes ***. */
static void redact_keywords(const char *in, char *out, size_t len)
{
        size_t o = 0;
        const char *p = in;
        out[0] = '\0';
        while (*p) {
                const char *k = p;
                while (*p && *p != '=' && *p != ' ' && *p != '\t')
                        p++;
                size_t klen = (size_t)(p - k);
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p != '=') {
                        put(out, len, &o, k, (size_t)(p - k));
                        continue;
                }
                p++;
                while (*p == ' ' || *p == '\t')
                        p++;
                bool secret = klen == 8 && strncasecmp(k, "password", 8) == 0;
                put(out, len, &o, k, klen);
                put(out, len, &o, "=", 1);
                const char *v = p;
                if (*p == '\'') {
                        for (p++; *p && *p != '\''; p++)
                                if (*p == '\\' && p[1])
                                        p++;
                        if (*p)
                                p++;
                } else
                        while (*p && *p != ' ' && *p != '\t')
                                p++;
                if (secret)
                        put(out, len, &o, "***", 3);
                else
                        put(out, len, &o, v, (size_t)(p - v));
                while (*p == ' ' || *p == '\t')
                        put(out, len, &o, p++, 1);
        }
}

/* The URI form: user:PASSWORD@ and password= among the parameters. */
static void redact_uri(const char *in, char *out, size_t len)
{
        size_t o = 0;
        const char *rest = strstr(in, "://") + 3;
        put(out, len, &o, in, (size_t)(rest - in));
        const char *at = strpbrk(rest, "@/?");
        const char *colon = memchr(rest, ':', at ? (size_t)(at - rest) : 0);
        if (at && *at == '@' && colon) {
                put(out, len, &o, rest, (size_t)(colon - rest) + 1);
                put(out, len, &o, "***", 3);
                rest = at;
        }
        const char *p = rest;
        while (*p) {
                bool start = p > in && (p[-1] == '?' || p[-1] == '&');
                if (start && strncasecmp(p, "password=", 9) == 0) {
                        put(out, len, &o, p, 9);
                        put(out, len, &o, "***", 3);
                        p += 9;
                        while (*p && *p != '&')
                                p++;
                } else
                        put(out, len, &o, p++, 1);
        }
}

void kvpg_redact(const char *conninfo, char *out, size_t len)
{
        if (len == 0)
                return;
        if (strncmp(conninfo, "postgresql://", 13) == 0 || strncmp(conninfo, "postgres://", 11) == 0)
                redact_uri(conninfo, out, len);
        else
                redact_keywords(conninfo, out, len);
}
