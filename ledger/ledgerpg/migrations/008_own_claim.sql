-- A record pending under the claim's own owner token is the claim's own
-- earlier write (a repeat after a lost reply), whatever its lease: the
-- claim answers it as it stands (ledger.Refused, which reports it
-- Reclaimed) and never takes it over from itself, which would report the
-- claim itself as the previous attempt. The claim function of
-- 005_quiet_claims.sql, with that one rule added.
--
-- What it locks, and for how long: CREATE OR REPLACE FUNCTION, an
-- instant; no row is written.
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
		ELSIF (old.state = 'pending' AND old.owner = p_owner)
			OR NOT {{func:claimable}}(old, p_fingerprint, p_now, p_abandoned) THEN
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
			WHERE r.key = p_key AND NOT (r.state = 'pending' AND r.owner = p_owner)
				AND {{func:claimable}}(r, p_fingerprint, p_now, p_abandoned)
			RETURNING r.*;
			IF FOUND THEN
				RETURN;
			END IF;
		END IF;
	END LOOP;
END
$claim$;
