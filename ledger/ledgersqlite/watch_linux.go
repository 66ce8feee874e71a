package ledgersqlite

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/oncely/oncely/ledger"
)

// watchGap is the least time between two calls of a fileWatch's function:
// a ledger that settles thousands of records a second wakes its waiters
// at most this often, each of them reading one record.
const watchGap = time.Millisecond

// inotify follows writes to one file with an inotify instance of its own,
// read by a goroutine in Go's poller. The watch is in place only while
// someone waits (start, pause), so that a Store nobody waits on is not
// woken by every settle of the ledger.
type inotify struct {
	path string
	fn   func()
	f    *os.File
	fd   int
	mu   sync.Mutex
	wd   int // -1: paused
	done chan struct{}
}

func newFileWatch(path string, fn func()) (fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("ledgersqlite: watch: %w: inotify: %w", ledger.ErrNoWatch, err)
	}
	w := &inotify{path: path, fn: fn, f: os.NewFile(uintptr(fd), "inotify"), fd: fd, wd: -1, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

func (w *inotify) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wd >= 0 {
		return nil
	}
	wd, err := unix.InotifyAddWatch(w.fd, w.path, unix.IN_MODIFY)
	if err != nil {
		return fmt.Errorf("ledgersqlite: watch %s: %w: %w", w.path, ledger.ErrNoWatch, err)
	}
	w.wd = wd
	return nil
}

func (w *inotify) pause() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wd < 0 {
		return nil
	}
	_, err := unix.InotifyRmWatch(w.fd, uint32(w.wd))
	w.wd = -1
	return err
}

func (w *inotify) close() error {
	err := w.f.Close() // ends the loop's Read
	<-w.done
	return err
}

// loop reads the events and calls fn for each batch of writes, at most
// once per watchGap (the kernel merges the writes that queue meanwhile).
func (w *inotify) loop() {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		modified := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			modified = modified || ev.Mask&unix.IN_MODIFY != 0
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if modified {
			w.fn()
			time.Sleep(watchGap)
		}
	}
}
