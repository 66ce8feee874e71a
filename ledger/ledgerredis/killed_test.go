package ledgerredis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// Environment of the child process of TestKilledWhileClaimed.
const (
	envChild = "LEDGERREDIS_CHILD_URL" // the ledger's URL, prefix included
	envKey   = "LEDGERREDIS_CHILD_KEY"
	envT0    = "LEDGERREDIS_CHILD_T0" // what the child's clock reads, Unix ms
)

// A process killed (SIGKILL) while it holds a claim leaves a pending
// record on the server; once its lease has lapsed, a claim in another
// process takes it over and must reconcile, and the dead owner's token no
// longer writes.
func TestKilledWhileClaimed(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	ledgerURL := url + "?prefix=" + redistest.Prefix(t, url)
	t0 := time.Now().Truncate(time.Second)
	key := "killed-1"

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+ledgerURL, envKey+"="+key, fmt.Sprintf("%s=%d", envT0, t0.UnixMilli()))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // never written: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	owner, ok := strings.CutPrefix(strings.TrimSpace(line), "CLAIMED ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, %v; want CLAIMED <owner>", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited cleanly; want killed")
	}

	clock := clock.NewFake(t0)
	store, err := ledgerredis.OpenURL(context.Background(), ledgerURL, &ledgerredis.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	rec, err := store.Get(ctx, key)
	if err != nil || rec.State != ledger.StatePending || rec.Owner != owner {
		t.Fatalf("record after the kill = %+v, %v; want pending, owned by %s", rec, err, owner)
	}
	p := params(key, "resumed", clock.Now())
	if res, err := store.Claim(ctx, p); err != nil || res.Claimed {
		t.Fatalf("claim within the dead owner's lease = %+v, %v; want blocked", res, err)
	}
	clock.Set(rec.LeaseUntil)
	p = params(key, "resumed", clock.Now())
	res, err := store.Claim(ctx, p)
	if err != nil || !res.Claimed || !res.MustReconcile() || res.Previous.Owner != owner {
		t.Fatalf("claim after the lease = %+v, %v; want a takeover that reconciles", res, err)
	}
	if err := store.Complete(ctx, key, owner, ledger.Completion{Summary: "late"}); !errors.Is(err, ledger.ErrNotOwner) {
		t.Errorf("Complete by the dead owner = %v, want ledger.ErrNotOwner", err)
	}
}

// killedChild is the body of the child process: it claims the key, says
// so, and waits to be killed.
func killedChild() error {
	ms, err := strconv.ParseInt(os.Getenv(envT0), 10, 64)
	if err != nil {
		return err
	}
	clock := clock.NewFake(time.UnixMilli(ms))
	store, err := ledgerredis.OpenURL(context.Background(), os.Getenv(envChild), &ledgerredis.Config{Clock: clock})
	if err != nil {
		return err
	}
	defer store.Close()
	owner := fmt.Sprintf("child-%d", os.Getpid())
	res, err := store.Claim(context.Background(), params(os.Getenv(envKey), owner, clock.Now()))
	if err != nil || !res.Claimed {
		return fmt.Errorf("claim = %+v, %v", res, err)
	}
	fmt.Println("CLAIMED", owner)
	_, err = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	return fmt.Errorf("stdin closed before the kill: %v", err)
}
