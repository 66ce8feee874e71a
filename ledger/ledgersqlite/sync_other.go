//go:build !linux

package ledgersqlite

import "os"

// syncData flushes f to the disk (os.File.Sync: fsync, F_FULLFSYNC on
// Darwin).
func syncData(f *os.File) error { return f.Sync() }
