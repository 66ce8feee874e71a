package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// NewOwner returns a fresh owner token: 128 random bits in hex and, where
// the process can name itself (Linux), "." its process id "." its start
// time "@" its host name "/" its machine: a hash of the boot id and the
// process id namespace. A caller on the same machine can then tell from a
// pending record's token that its owner has exited (OwnerExited), and
// take the record over at once instead of waiting for the lease.
func NewOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + self.suffix
}

// self is this process's part of its owner tokens ("" where it cannot name
// itself).
var self = whoAmI()

// processID is what an owner token says of its process.
type processID struct {
	pid     int
	start   uint64 // the process's start time, in clock ticks after boot
	host    string
	machine string
	suffix  string // ".pid.start@host/machine"
}

// parseOwner reads the process part of an owner token made by NewOwner.
func parseOwner(owner string) (processID, bool) {
	at := strings.LastIndexByte(owner, '@')
	if at < 0 {
		return processID{}, false
	}
	host, machine, ok := strings.Cut(owner[at+1:], "/")
	if !ok {
		return processID{}, false
	}
	parts := strings.Split(owner[:at], ".")
	if len(parts) != 3 {
		return processID{}, false
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return processID{}, false
	}
	return processID{pid: pid, start: start, host: host, machine: machine}, true
}

// OwnerExited reports whether owner, the token of a pending record's claim,
// names a process of this machine (the same host name, boot and process id
// namespace) that has exited: no process has its id any more, the one that
// has it started at another time (the id was reused), or it is a zombie.
// It reports false whenever that is not known for certain: a token of
// another machine, one not made by NewOwner, a platform where processes
// cannot be looked at, or a process that cannot be read.
//
// A claim may then take the record over at once (ClaimParams.Abandoned)
// and reconcile, as after the lease: its owner sends nothing any more.
func OwnerExited(owner string) bool {
	if self.suffix == "" {
		return false
	}
	p, ok := parseOwner(owner)
	if !ok || p.host != self.host || p.machine != self.machine {
		return false
	}
	return exited(p)
}
