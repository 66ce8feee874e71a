package ledgerpg

import "github.com/idemkit/idemkit/ledger"

// ListQuery is the query of s's List for f, with its arguments (the first
// is the statement mode).
func ListQuery(s *Store, f ledger.Filter) (string, []any) { return s.listQuery(f) }

// Versions is the number of migrations, the version Migrate brings a table to.
var Versions = len(migrations)
