-- The operator's listings: the done and failed records by time (List of
-- a settled state, by (lease_until, key) after a cursor), which the
-- console's overview, its search by state and its bounded searches read
-- a page at a time, and the counter records of the executors and
-- sweepers (run_id ledger.CountersRun), which its overview reads by time.
-- Without them each such page read the table (seconds per million
-- records).
--
-- What it costs a write: the settled index takes an entry when a record
-- is settled (Complete, a Fail, Resolve), none for a claim or a
-- heartbeat (a pending record is not in it): one entry more per action,
-- five instead of four (BENCHMARKS.md, ledgerpg). The counters' index
-- takes an entry only for a counter record (at most one per tool, minute
-- and process); other records fail its predicate and cost nothing.
--
-- What it locks, and for how long: building the settled index locks the
-- table's writes (SHARE), reads go on, until the migration commits:
-- seconds per million records. No row is written.
CREATE INDEX {{index:settled}} ON {{table}} (state, lease_until, key)
	WHERE state IN ('done', 'failed');
CREATE INDEX {{index:counters}} ON {{table}} (lease_until, key)
	WHERE run_id = 'oncely/counters';
