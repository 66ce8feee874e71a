-- The records table. {{table}} is the schema-qualified table name,
-- {{index:x}} the name of its index x.
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
