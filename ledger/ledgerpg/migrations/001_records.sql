-- The records table. {{table}} is the schema-qualified table name,
-- {{index:x}} the name of its index x, {{func:x}} the schema-qualified
-- name of its function x.
CREATE TABLE {{table}} (
	key              text        NOT NULL PRIMARY KEY,
	tool             text        NOT NULL,
	run_id           text        NOT NULL,
	state            text        NOT NULL CHECK (state IN ('pending', 'done', 'failed', 'uncertain')),
	owner            text        NOT NULL,
	lease_until      timestamptz NOT NULL,
	expires_at       timestamptz NOT NULL,
	fingerprint      text        NOT NULL,
	attempt          integer     NOT NULL,
	attempt_at       timestamptz NOT NULL,
	summary          text        NOT NULL DEFAULT '',
	ref              text        NOT NULL DEFAULT '',
	result           bytea,
	truncated        boolean     NOT NULL DEFAULT false,
	reason           text        NOT NULL DEFAULT '',
	updated_at       timestamptz NOT NULL,
	-- What the latest claim found: '' when it was refused, 'none' when it
	-- took over nothing (absent or expired), else the state of the record
	-- it took over, whose fields follow. Claim returns them.
	prev_state       text        NOT NULL DEFAULT 'none',
	prev_owner       text        NOT NULL DEFAULT '',
	prev_lease_until timestamptz NOT NULL DEFAULT 'epoch',
	prev_expires_at  timestamptz NOT NULL DEFAULT 'epoch',
	prev_fingerprint text        NOT NULL DEFAULT '',
	prev_attempt     integer     NOT NULL DEFAULT 0,
	prev_attempt_at  timestamptz NOT NULL DEFAULT 'epoch',
	prev_reason      text        NOT NULL DEFAULT '',
	prev_updated_at  timestamptz NOT NULL DEFAULT 'epoch',
	prev_tool        text        NOT NULL DEFAULT '',
	prev_run_id      text        NOT NULL DEFAULT ''
);
-- List of stuck records (state, lease_until) and by run; Purge by expiry.
CREATE INDEX {{index:state_lease}} ON {{table}} (state, lease_until);
CREATE INDEX {{index:run}} ON {{table}} (run_id);
CREATE INDEX {{index:expires}} ON {{table}} (expires_at);

-- The claim, one statement. old reads the record (the statement's
-- snapshot); when it blocks the claim it is the answer and nothing is
-- written. Otherwise ins inserts the claim; on a conflict it locks the
-- newest version of the row and decides again on that (c: claimable,
-- a: absent, that is settled and past its retention; a pending record
-- never expires): a takeover copies the old
-- fields into prev_* and returns them with the new record; a refusal (the
-- row changed after the snapshot) rewrites the row unchanged but for an
-- empty prev_state and returns it. A function, so that the server prepares
-- the statement once per connection even when statements are sent
-- unprepared (through PgBouncer in transaction pooling mode).
CREATE FUNCTION {{func:claim}}(p_key text, p_tool text, p_run_id text, p_owner text,
	p_lease_until timestamptz, p_expires_at timestamptz, p_fingerprint text, p_now timestamptz)
RETURNS SETOF {{table}} LANGUAGE plpgsql AS $claim$
BEGIN
	RETURN QUERY
	WITH old AS (
		SELECT r.*, ((r.expires_at <= p_now AND r.state <> 'pending')
			OR r.state = 'failed'
			OR (r.state = 'uncertain' AND r.fingerprint = p_fingerprint)
			OR (r.state = 'pending' AND r.lease_until <= p_now AND r.fingerprint = p_fingerprint)) AS claimable
		FROM {{table}} AS r WHERE r.key = p_key
	), ins AS (
		INSERT INTO {{table}} AS r (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
			attempt, attempt_at, updated_at, prev_state)
		SELECT p_key, p_tool, p_run_id, 'pending', p_owner, p_lease_until, p_expires_at, p_fingerprint,
			1, p_now, p_now, 'none'
		WHERE NOT EXISTS (SELECT FROM old WHERE NOT old.claimable)
		ON CONFLICT (key) DO UPDATE SET (tool, run_id, state, owner, lease_until, expires_at, fingerprint,
				attempt, attempt_at, summary, ref, result, truncated, reason, updated_at,
				prev_state, prev_owner, prev_lease_until, prev_expires_at, prev_fingerprint, prev_attempt,
				prev_attempt_at, prev_reason, prev_updated_at, prev_tool, prev_run_id) = (
			SELECT CASE WHEN f.c THEN p_tool ELSE r.tool END,
				CASE WHEN f.c THEN p_run_id ELSE r.run_id END,
				CASE WHEN f.c THEN 'pending' ELSE r.state END,
				CASE WHEN f.c THEN p_owner ELSE r.owner END,
				CASE WHEN f.c THEN p_lease_until ELSE r.lease_until END,
				CASE WHEN f.c THEN p_expires_at ELSE r.expires_at END,
				CASE WHEN f.c THEN p_fingerprint ELSE r.fingerprint END,
				CASE WHEN f.c AND f.a THEN 1 ELSE r.attempt END,
				CASE WHEN f.c AND f.a THEN p_now ELSE r.attempt_at END,
				CASE WHEN f.c THEN '' ELSE r.summary END,
				CASE WHEN f.c THEN '' ELSE r.ref END,
				CASE WHEN f.c THEN NULL ELSE r.result END,
				CASE WHEN f.c THEN false ELSE r.truncated END,
				CASE WHEN f.c THEN '' ELSE r.reason END,
				CASE WHEN f.c THEN p_now ELSE r.updated_at END,
				CASE WHEN NOT f.c THEN '' WHEN f.a THEN 'none' ELSE r.state END,
				r.owner, r.lease_until, r.expires_at, r.fingerprint, r.attempt,
				r.attempt_at, r.reason, r.updated_at, r.tool, r.run_id
			FROM (SELECT ((r.expires_at <= p_now AND r.state <> 'pending')
					OR r.state = 'failed'
					OR (r.state = 'uncertain' AND r.fingerprint = p_fingerprint)
					OR (r.state = 'pending' AND r.lease_until <= p_now AND r.fingerprint = p_fingerprint)) AS c,
				(r.expires_at <= p_now AND r.state <> 'pending') AS a) AS f)
		RETURNING r.*
	)
	SELECT * FROM ins
	UNION ALL
	SELECT old.key, old.tool, old.run_id, old.state, old.owner, old.lease_until, old.expires_at, old.fingerprint,
		old.attempt, old.attempt_at, old.summary, old.ref, old.result, old.truncated, old.reason, old.updated_at,
		''::text, old.prev_owner, old.prev_lease_until, old.prev_expires_at, old.prev_fingerprint, old.prev_attempt,
		old.prev_attempt_at, old.prev_reason, old.prev_updated_at, old.prev_tool, old.prev_run_id
	FROM old WHERE NOT old.claimable;
END
$claim$;
