package tooling

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// ErrExited is matched by WaitReady's error when the process exits before
// it is ready.
var ErrExited = errors.New("exited before it answered")

// Process is a server a test helper started: its output goes to Out, and
// its exit is observed.
type Process struct {
	Cmd *exec.Cmd
	Out *Buffer

	exited chan struct{}
}

// StartProcess starts cmd with its standard output and error in a Buffer
// that keeps the first max bytes (0: all), and reaps it when it exits.
func StartProcess(cmd *exec.Cmd, max int) (*Process, error) {
	p := &Process{Cmd: cmd, Out: &Buffer{Max: max}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// WaitReady calls ready every interval until it returns true. It fails
// when the process exits first (ErrExited), when timeout passes, or when
// ctx ends; it leaves the process running.
func (p *Process) WaitReady(ctx context.Context, timeout, interval time.Duration, ready func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.exited:
			return ErrExited
		case <-deadline.C:
			return fmt.Errorf("did not answer within %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
