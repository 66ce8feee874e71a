//go:build !linux

package ledgersqlite

import (
	"fmt"

	"github.com/idemkit/idemkit/ledger"
)

// newFileWatch is not available here: callers poll.
func newFileWatch(path string, fn func()) (fileWatch, error) {
	return nil, fmt.Errorf("ledgersqlite: %w: file-change notification is implemented on Linux only", ledger.ErrNoWatch)
}
