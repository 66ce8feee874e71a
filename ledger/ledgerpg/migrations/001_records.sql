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

-- Whether the record r gives way to a claim of the action with
-- fingerprint p_fingerprint at p_now: it expired (settled and past its
-- retention; a pending record never expires), failed, or, for the same
-- action, is uncertain or pending with a lapsed lease.
CREATE FUNCTION {{func:claimable}}(r {{table}}, p_fingerprint text, p_now timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $claimable$
	SELECT (r.expires_at <= p_now AND r.state <> 'pending')
		OR r.state = 'failed'
		OR (r.state = 'uncertain' AND r.fingerprint = p_fingerprint)
		OR (r.state = 'pending' AND r.lease_until <= p_now AND r.fingerprint = p_fingerprint)
$claimable$;

-- The claim, in one call. A record that blocks the claim (read in a
-- snapshot) is the answer, and nothing is written or locked. Otherwise
-- one INSERT ... ON CONFLICT DO UPDATE decides on the newest version of
-- the row, which it locks (c: it gives way, a: it expired): a takeover
-- copies the old fields into prev_* and returns them with the new record
-- (RETURNING sees only the new row); a claim that lost a race since the
-- read rewrites the row unchanged but for an empty prev_state and returns
-- it. A PL/pgSQL function, so that the server prepares its statements
-- once per connection even when the client sends its own unprepared
-- (through PgBouncer in transaction pooling mode).
CREATE FUNCTION {{func:claim}}(p_key text, p_tool text, p_run_id text, p_owner text,
	p_lease_until timestamptz, p_expires_at timestamptz, p_fingerprint text, p_now timestamptz)
RETURNS SETOF {{table}} LANGUAGE plpgsql AS $claim$
DECLARE
	old {{table}};
BEGIN
	SELECT * INTO old FROM {{table}} AS r WHERE r.key = p_key;
	IF FOUND AND NOT {{func:claimable}}(old, p_fingerprint, p_now) THEN
		old.prev_state := '';
		RETURN NEXT old;
		RETURN;
	END IF;
	RETURN QUERY
	INSERT INTO {{table}} AS r (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
		attempt, attempt_at, updated_at, prev_state)
	VALUES (p_key, p_tool, p_run_id, 'pending', p_owner, p_lease_until, p_expires_at, p_fingerprint,
		1, p_now, p_now, 'none')
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
		FROM (SELECT {{func:claimable}}(r, p_fingerprint, p_now) AS c,
			r.expires_at <= p_now AND r.state <> 'pending' AS a) AS f)
	RETURNING r.*;
END
$claim$;
