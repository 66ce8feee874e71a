-- Complete and Fail notify the table's channel (Watch) only for a record
-- that somebody watches: a transaction that ran NOTIFY takes a lock of the
-- whole cluster when it commits (in PreCommit_Notify) and keeps it through
-- its commit record's flush, so that notifying on every settle would
-- serialise every settle's commit, while waiters exist only for a
-- duplicate caught in flight.
--
-- What it locks, and for how long: ADD COLUMN with a constant default
-- rewrites no row (the default is kept in the catalog) but locks reads and
-- writes (ACCESS EXCLUSIVE) from there to the migration's commit, an
-- instant. Replacing the two functions locks nothing; a session that had
-- called them plans them again.

-- watched: a Watch marked the record while it was pending. Only Watch
-- sets it (UPDATE ... SET watched = true WHERE key = $1 AND state =
-- 'pending' AND NOT watched, after its LISTEN has taken effect); nothing
-- clears it: a claim that takes the record over keeps it, so that a
-- waiter still waiting across the takeover is woken by the new owner's
-- settle, and a record marked once costs one notification per later
-- settle, until Purge deletes it. A record inserted anew starts false.
ALTER TABLE {{table}} ADD COLUMN watched boolean NOT NULL DEFAULT false;

-- The settles, as in version 5, but they notify the table's channel with
-- the key themselves, when they applied and the record is watched. The
-- RETURNING reads the version the UPDATE wrote, which carries watched from
-- the newest committed version (READ COMMITTED rechecks a row a concurrent
-- writer changed on its newest version): see Store.Watch for why a waiter
-- marked before the settle is always notified. NOTIFY is sent at the
-- transaction's commit, never for one that rolls back. The statements of
-- the previous version (SELECT pg_notify(...) WHERE <complete>(...))
-- still work on this one: they notify every settle, once more for a
-- watched one.
CREATE OR REPLACE FUNCTION {{func:complete}}(p_key text, p_owner text, p_summary text, p_ref text, p_result bytea,
	p_truncated boolean, p_now timestamptz, p_retention_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $complete$
DECLARE
	w boolean;
BEGIN
	UPDATE {{table}} SET state = 'done', summary = p_summary, ref = p_ref, result = p_result, truncated = p_truncated,
		reason = '', lease_until = p_now, updated_at = p_now,
		expires_at = CASE WHEN p_retention_ms > 0 THEN p_now + p_retention_ms * interval '1 millisecond' ELSE expires_at END
	WHERE key = p_key AND owner = p_owner AND state = 'pending'
	RETURNING watched INTO w;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF w THEN
		PERFORM pg_notify({{channel}}, p_key);
	END IF;
	RETURN true;
END
$complete$;

CREATE OR REPLACE FUNCTION {{func:fail}}(p_key text, p_owner text, p_state text, p_advance integer, p_reason text,
	p_now timestamptz, p_retention_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $fail$
DECLARE
	w boolean;
BEGIN
	UPDATE {{table}} SET state = p_state, attempt = attempt + p_advance,
		attempt_at = CASE WHEN p_advance = 1 THEN p_now ELSE attempt_at END, reason = p_reason,
		lease_until = p_now, updated_at = p_now,
		expires_at = CASE WHEN p_advance = 1 AND p_retention_ms > 0 THEN p_now + p_retention_ms * interval '1 millisecond' ELSE expires_at END
	WHERE key = p_key AND owner = p_owner AND state = 'pending'
	RETURNING watched INTO w;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF w THEN
		PERFORM pg_notify({{channel}}, p_key);
	END IF;
	RETURN true;
END
$fail$;
