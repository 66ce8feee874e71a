package ledgersqlite

import (
	"os"
	"syscall"
)

// syncData flushes f's data, and the metadata needed to read it back (its
// size), to the disk: fdatasync, as SQLite uses.
func syncData(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
