-- A refused claim writes nothing; fewer index entries per write;
-- autovacuum settings for a table of high churn; the owner's writes as
-- functions, whose plans the server keeps per connection.
--
-- What it locks, and for how long (all in Migrate's one transaction):
-- building the two partial indexes locks the table's writes (SHARE),
-- reads go on, until the migration commits: the sweeper's index holds
-- only the pending and uncertain records (an instant), the purge index
-- the done and failed ones (seconds per million records). The ALTER TABLE
-- of the autovacuum settings takes SHARE UPDATE EXCLUSIVE (it only waits
-- for a running VACUUM). The three DROP INDEX come last: they lock reads
-- and writes (ACCESS EXCLUSIVE) from there to the commit, an instant.
-- No row is written or deleted.

-- The sweeper's listings (List of pending or uncertain records by
-- (lease_until, key), after a cursor, optionally of one run): a done or
-- failed record leaves the index, so that Complete and a definite Fail
-- add no entry to it and a page costs the stuck records, not the ledger.
CREATE INDEX {{index:sweep}} ON {{table}} (state, lease_until, key)
	WHERE state IN ('pending', 'uncertain');
-- Purge: the done and failed records, oldest expiry first. A pending or
-- uncertain record never expires, so it has no entry here.
CREATE INDEX {{index:purge}} ON {{table}} (expires_at)
	WHERE state IN ('done', 'failed');

-- A ledger table is rewritten all day (every action inserts a row and
-- updates it at least once, Purge deletes it later) and no update is HOT
-- (each one changes an indexed column): vacuum after 2% of the rows are
-- dead rather than 20%, so that dead versions and index entries do not
-- pile up between runs on a large table.
ALTER TABLE {{table}} SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,
	autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000);

-- The claim. A refused claim writes nothing, and nothing is locked but
-- what PostgreSQL locks to wait for a concurrent claim to commit. In a
-- loop, each statement with its own snapshot (READ COMMITTED):
--   - no record: INSERT ... ON CONFLICT DO NOTHING. A concurrent claim
--     that inserted the key first makes it wait for that claim's commit
--     and insert nothing; the next turn reads that record.
--   - a record that blocks the claim: it is the answer.
--   - a record that gives way: an UPDATE conditional on the newest version
--     still giving way (PostgreSQL rechecks the WHERE on it after waiting
--     for a concurrent writer). The takeover copies the fields it replaces
--     into prev_* (RETURNING sees only the new row) and returns them; when
--     the record changed or went in between, nothing is written and the
--     next turn reads it again.
-- A turn that does not return follows a commit of another session, so the
-- loop ends. At REPEATABLE READ or SERIALIZABLE (Store.InTx) such a
-- change is a serialization error instead, as documented.
CREATE OR REPLACE FUNCTION {{func:claim}}(p_key text, p_tool text, p_run_id text, p_owner text,
	p_lease_until timestamptz, p_expires_at timestamptz, p_fingerprint text, p_now timestamptz, p_abandoned text)
RETURNS SETOF {{table}} LANGUAGE plpgsql AS $claim$
DECLARE
	old {{table}};
BEGIN
	LOOP
		SELECT * INTO old FROM {{table}} AS r WHERE r.key = p_key;
		IF NOT FOUND THEN
			RETURN QUERY
			INSERT INTO {{table}} AS r (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
				attempt, attempt_at, updated_at, prev_state)
			VALUES (p_key, p_tool, p_run_id, 'pending', p_owner, p_lease_until, p_expires_at, p_fingerprint,
				1, p_now, p_now, 'none')
			ON CONFLICT (key) DO NOTHING
			RETURNING r.*;
			IF FOUND THEN
				RETURN;
			END IF;
		ELSIF NOT {{func:claimable}}(old, p_fingerprint, p_now, p_abandoned) THEN
			old.prev_state := '';
			RETURN NEXT old;
			RETURN;
		ELSE
			-- Where the record expired, the claim takes over nothing: a new
			-- first attempt, and prev_state 'none'.
			RETURN QUERY
			UPDATE {{table}} AS r SET tool = p_tool, run_id = p_run_id, state = 'pending', owner = p_owner,
				lease_until = p_lease_until, expires_at = p_expires_at, fingerprint = p_fingerprint,
				attempt = CASE WHEN r.expires_at <= p_now AND r.state IN ('done', 'failed') THEN 1 ELSE r.attempt END,
				attempt_at = CASE WHEN (r.expires_at <= p_now AND r.state IN ('done', 'failed')) OR r.state = 'failed' THEN p_now ELSE r.attempt_at END,
				summary = '', ref = '', result = NULL, truncated = false, reason = '', updated_at = p_now,
				prev_state = CASE WHEN r.expires_at <= p_now AND r.state IN ('done', 'failed') THEN 'none' ELSE r.state END,
				prev_owner = r.owner, prev_lease_until = r.lease_until, prev_expires_at = r.expires_at,
				prev_fingerprint = r.fingerprint, prev_attempt = r.attempt, prev_attempt_at = r.attempt_at,
				prev_reason = r.reason, prev_updated_at = r.updated_at, prev_tool = r.tool, prev_run_id = r.run_id
			WHERE r.key = p_key AND {{func:claimable}}(r, p_fingerprint, p_now, p_abandoned)
			RETURNING r.*;
			IF FOUND THEN
				RETURN;
			END IF;
		END IF;
	END LOOP;
END
$claim$;

-- The owner's writes, each conditional on the owner token of a pending
-- record; true when it applied. Functions, so that the server plans their
-- UPDATE once per connection, also for statements the client sends
-- unprepared (through PgBouncer in transaction pooling mode). Their
-- UPDATEs are those the package sent itself before this migration.
CREATE FUNCTION {{func:complete}}(p_key text, p_owner text, p_summary text, p_ref text, p_result bytea,
	p_truncated boolean, p_now timestamptz, p_retention_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $complete$
BEGIN
	UPDATE {{table}} SET state = 'done', summary = p_summary, ref = p_ref, result = p_result, truncated = p_truncated,
		reason = '', lease_until = p_now, updated_at = p_now,
		expires_at = CASE WHEN p_retention_ms > 0 THEN p_now + p_retention_ms * interval '1 millisecond' ELSE expires_at END
	WHERE key = p_key AND owner = p_owner AND state = 'pending';
	RETURN FOUND;
END
$complete$;

-- p_advance is 1 for a definite failure (state failed), which begins a
-- new attempt, and 0 for an uncertain outcome.
CREATE FUNCTION {{func:fail}}(p_key text, p_owner text, p_state text, p_advance integer, p_reason text,
	p_now timestamptz, p_retention_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $fail$
BEGIN
	UPDATE {{table}} SET state = p_state, attempt = attempt + p_advance,
		attempt_at = CASE WHEN p_advance = 1 THEN p_now ELSE attempt_at END, reason = p_reason,
		lease_until = p_now, updated_at = p_now,
		expires_at = CASE WHEN p_advance = 1 AND p_retention_ms > 0 THEN p_now + p_retention_ms * interval '1 millisecond' ELSE expires_at END
	WHERE key = p_key AND owner = p_owner AND state = 'pending';
	RETURN FOUND;
END
$fail$;

-- Extend keeps the record at least as long as its lease.
CREATE FUNCTION {{func:extend}}(p_key text, p_owner text, p_lease_until timestamptz, p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $extend$
BEGIN
	UPDATE {{table}} SET lease_until = p_lease_until, expires_at = GREATEST(expires_at, p_lease_until), updated_at = p_now
	WHERE key = p_key AND owner = p_owner AND state = 'pending';
	RETURN FOUND;
END
$extend$;

-- Replaced by the partial indexes above; List by run id has an index only
-- where Config.RunIndex asks for one (Migrate creates it after the
-- migrations).
DROP INDEX {{qindex:state_lease_key}};
DROP INDEX {{qindex:expires}};
DROP INDEX {{qindex:run}};
