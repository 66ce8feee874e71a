package stripemocktest

import "syscall"

// sysProcAttr has the kernel kill stripe-mock when the test binary dies
// before it could stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
