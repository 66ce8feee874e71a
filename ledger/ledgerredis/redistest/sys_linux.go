package redistest

import "syscall"

// sysProcAttr makes the kernel stop a server this process started when the
// process dies before it could stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
