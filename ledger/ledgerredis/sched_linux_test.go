package ledgerredis_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// realtime runs the thread pid (a server's main thread: its process id)
// under SCHED_FIFO at the lowest real-time priority, so that no process
// of the normal class preempts it: what SLOWLOG then records of a script
// is the script's own time, not the time the server waited for a CPU on a
// busy machine. It fails where the process may not (no CAP_SYS_NICE).
func realtime(pid int) error {
	return unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
}

// runqueueWait returns how long the thread pid has waited, runnable, for
// a CPU since it started (the second field of its schedstat).
func runqueueWait(pid int) (ns int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("schedstat of %d: %q", pid, b)
	}
	return strconv.ParseInt(f[1], 10, 64)
}
