//go:build !linux

package ledgersqlite

import (
	"fmt"

	"github.com/oncely/oncely/ledger"
)

// newFileWatch is not available here: callers poll.
func newFileWatch(path string, fn func()) (fileWatch, error) {
	return nil, fmt.Errorf("ledgersqlite: %w: file-change notification is implemented on Linux only", ledger.ErrNoWatch)
}
