-- A claim may take over a pending record whose owner is known to have
-- exited (ledger.ClaimParams.Abandoned: its owner token names a process of
-- the claimer's machine that is gone), although its lease is live. The
-- claim and claimable functions gain a parameter, p_abandoned, the owner
-- token of that record ('' for none); their other lines are those of
-- migration 3, whose functions are dropped (a binary that knows fewer
-- migrations refuses the table).
CREATE OR REPLACE FUNCTION {{func:claimable}}(r {{table}}, p_fingerprint text, p_now timestamptz, p_abandoned text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $claimable$
	SELECT (r.expires_at <= p_now AND r.state IN ('done', 'failed'))
		OR r.state = 'failed'
		OR (r.state = 'uncertain' AND r.fingerprint = p_fingerprint)
		OR (r.state = 'pending' AND (r.lease_until <= p_now OR r.owner = p_abandoned) AND r.fingerprint = p_fingerprint)
$claimable$;

CREATE OR REPLACE FUNCTION {{func:claim}}(p_key text, p_tool text, p_run_id text, p_owner text,
	p_lease_until timestamptz, p_expires_at timestamptz, p_fingerprint text, p_now timestamptz, p_abandoned text)
RETURNS SETOF {{table}} LANGUAGE plpgsql AS $claim$
DECLARE
	old {{table}};
BEGIN
	SELECT * INTO old FROM {{table}} AS r WHERE r.key = p_key;
	IF FOUND AND NOT {{func:claimable}}(old, p_fingerprint, p_now, p_abandoned) THEN
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
			CASE WHEN f.c AND (f.a OR r.state = 'failed') THEN p_now ELSE r.attempt_at END,
			CASE WHEN f.c THEN '' ELSE r.summary END,
			CASE WHEN f.c THEN '' ELSE r.ref END,
			CASE WHEN f.c THEN NULL ELSE r.result END,
			CASE WHEN f.c THEN false ELSE r.truncated END,
			CASE WHEN f.c THEN '' ELSE r.reason END,
			CASE WHEN f.c THEN p_now ELSE r.updated_at END,
			CASE WHEN NOT f.c THEN '' WHEN f.a THEN 'none' ELSE r.state END,
			r.owner, r.lease_until, r.expires_at, r.fingerprint, r.attempt,
			r.attempt_at, r.reason, r.updated_at, r.tool, r.run_id
		FROM (SELECT {{func:claimable}}(r, p_fingerprint, p_now, p_abandoned) AS c,
			r.expires_at <= p_now AND r.state IN ('done', 'failed') AS a) AS f)
	RETURNING r.*;
END
$claim$;

DROP FUNCTION {{func:claim}}(text, text, text, text, timestamptz, timestamptz, text, timestamptz);
DROP FUNCTION {{func:claimable}}({{table}}, text, timestamptz);
