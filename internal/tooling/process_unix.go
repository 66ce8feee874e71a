//go:build unix

package tooling

import (
	"syscall"
	"time"
)

// Stop sends sig to the process, or to its process group when group is
// set, and waits for it to exit; after grace it kills it with SIGKILL (its
// process group when it runs in one of its own) and waits. It reports
// whether it had to kill it.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration, group bool) (killed bool) {
	pid := p.Cmd.Process.Pid
	if group {
		_ = syscall.Kill(-pid, sig)
	} else {
		_ = p.Cmd.Process.Signal(sig)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return false
	case <-t.C:
	}
	if a := p.Cmd.SysProcAttr; a != nil && a.Setpgid {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	} else {
		_ = p.Cmd.Process.Kill()
	}
	<-p.exited
	return true
}
