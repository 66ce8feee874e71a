//go:build unix

package tooling

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Buffer with Max keeps the first Max bytes and reports every write
// whole.
func TestBufferMax(t *testing.T) {
	t.Parallel()
	b := &Buffer{Max: 5}
	for _, s := range []string{"abc", "def", "ghi"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "abcde" {
		t.Errorf("kept %q, want %q", got, "abcde")
	}
}

// A process that exits before it is ready is reported as exited, with its
// output kept.
func TestWaitReadyExited(t *testing.T) {
	t.Parallel()
	p, err := StartProcess(exec.Command("/bin/sh", "-c", "echo broken; exit 3"), 0)
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), time.Hour, time.Millisecond, func() bool { return false })
	if !errors.Is(err, ErrExited) || !strings.Contains(p.Out.String(), "broken") {
		t.Fatalf("err = %v, output %q; want ErrExited and the output", err, p.Out)
	}
}

// Stop kills, after the grace period, a process group that ignores the
// signal, and reports it; a process that obeys is not killed.
func TestStop(t *testing.T) {
	t.Parallel()
	start := func(script string) *Process {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p, err := StartProcess(cmd, 0)
		if err != nil {
			t.Fatal(err)
		}
		ready := func() bool { return strings.Contains(p.Out.String(), "ready") }
		if err := p.WaitReady(context.Background(), time.Hour, time.Millisecond, ready); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stubborn := start(`trap "" TERM; echo ready; while :; do sleep 1; done`)
	if !stubborn.Stop(syscall.SIGTERM, 10*time.Millisecond, true) {
		t.Error("a process ignoring SIGTERM was not reported killed")
	}
	obedient := start(`echo ready; exec sleep 1000`)
	if obedient.Stop(syscall.SIGTERM, time.Hour, false) {
		t.Error("a process that ended on SIGTERM was reported killed")
	}
	for _, p := range []*Process{stubborn, obedient} {
		select {
		case <-p.Exited():
		default:
			t.Errorf("pid %d still running after Stop", p.Cmd.Process.Pid)
		}
	}
}
