-- List returns a state's records in (lease_until, key) order and pages
-- after a (lease_until, key) cursor: with the key in the index, a page is
-- one range scan that stops at the limit, without sorting the records of
-- equal lease. It replaces the (state, lease_until) index, a prefix of it.
-- {{qindex:x}} is the schema-qualified name of index x. Building it locks
-- the table's writes until it is built (seconds per million records).
CREATE INDEX {{index:state_lease_key}} ON {{table}} (state, lease_until, key);
DROP INDEX {{qindex:state_lease}};
