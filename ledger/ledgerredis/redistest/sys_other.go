//go:build !linux

package redistest

import "syscall"

// sysProcAttr: outside Linux a server outlives a test process that dies
// before it could stop it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
