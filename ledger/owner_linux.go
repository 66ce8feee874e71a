package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// whoAmI names this process for its owner tokens: its id, its start time,
// the host name, and a hash of the boot id and the process id namespace
// (two containers of one host with the same host name see each other's
// processes only if they share that namespace).
func whoAmI() processID {
	pid := os.Getpid()
	start, state, err := procStat(pid)
	if err != nil || state == "" {
		return processID{}
	}
	host, err := os.Hostname()
	boot, err2 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, err3 := os.Readlink("/proc/self/ns/pid")
	if err != nil || err2 != nil || err3 != nil || host == "" || strings.ContainsAny(host, "@/") {
		return processID{}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "\x00" + ns))
	p := processID{pid: pid, start: start, host: host, machine: hex.EncodeToString(sum[:8])}
	p.suffix = "." + strconv.Itoa(pid) + "." + strconv.FormatUint(start, 10) + "@" + host + "/" + p.machine
	return p
}

// exited reports whether p's process is known to be gone.
func exited(p processID) bool {
	start, state, err := procStat(p.pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true // no process has the id
	case err != nil:
		return false
	}
	return start != p.start || state == "Z" || state == "X"
}

// procStat reads a process's start time (clock ticks after boot) and state
// from /proc/<pid>/stat.
func procStat(pid int) (start uint64, state string, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", err
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow begin after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", errors.New("ledger: unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, "", errors.New("ledger: short /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0], err
}
