package ledger_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// ownerChildEnv makes the test binary a child process that prints an
// owner token and lives until its standard input closes.
const ownerChildEnv = "ONCELY_OWNER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(ownerChildEnv) != "" {
		os.Stdout.WriteString(ledger.NewOwner() + "\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A token names its process, and only a process of this machine known to
// be gone is reported exited: never this process, a token without a
// process part, or one of another host or machine.
func TestOwnerExitedNotKnown(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owner tokens name their process on Linux only")
	}
	own := ledger.NewOwner()
	pid := strconv.Itoa(os.Getpid())
	if !strings.Contains(own, "."+pid+".") || !strings.Contains(own, "@") {
		t.Fatalf("NewOwner() = %q, want it to name process %s and its host", own, pid)
	}
	if other := ledger.NewOwner(); other == own || other[32:] != own[32:] {
		t.Errorf("two tokens %q and %q: want a fresh random part and the same process part", own, other)
	}
	random, process, _ := strings.Cut(own, ".")
	at := strings.LastIndexByte(process, '@')
	host, machine, _ := strings.Cut(process[at+1:], "/")
	for _, c := range []struct{ what, token string }{
		{"this process", own},
		{"a token without a process part", random},
		{"an operator's token", "operator:alice:" + random[:16]},
		{"a token of another host", random + "." + process[:at] + "@other-" + host + "/" + machine},
		{"a token of another machine (boot, pid namespace)", random + "." + process[:at] + "@" + host + "/0000000000000000"},
		{"a token with a bad pid", random + ".x.1@" + host + "/" + machine},
	} {
		if ledger.OwnerExited(c.token) {
			t.Errorf("OwnerExited(%s %q) = true, want false", c.what, c.token)
		}
	}
	// The same process id with another start time is a reused id: the
	// process that made the token has gone.
	fields := strings.Split(process[:at], ".")
	start, _ := strconv.ParseUint(fields[1], 10, 64)
	reused := random + "." + fields[0] + "." + strconv.FormatUint(start+1, 10) + "@" + host + "/" + machine
	if !ledger.OwnerExited(reused) {
		t.Errorf("OwnerExited(%q) = false for a reused process id, want true", reused)
	}
}

// A real child process's token: not exited while it runs; exited once it
// has ended, as a zombie not yet reaped and after it was reaped.
func TestOwnerExitedChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owner tokens name their process on Linux only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	token, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	token = strings.TrimSpace(token)
	if !strings.Contains(token, "."+strconv.Itoa(cmd.Process.Pid)+".") {
		t.Fatalf("child's token %q does not name its pid %d", token, cmd.Process.Pid)
	}
	if ledger.OwnerExited(token) {
		t.Fatalf("OwnerExited(%q) = true while the child runs", token)
	}
	stdin.Close() // the child exits; unreaped, it is a zombie
	deadline := time.Now().Add(time.Minute)
	for !ledger.OwnerExited(token) {
		if time.Now().After(deadline) {
			t.Fatalf("OwnerExited(%q) still false a minute after the child was told to exit", token)
		}
		time.Sleep(5 * time.Millisecond) // poll for the child's exit
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !ledger.OwnerExited(token) {
		t.Errorf("OwnerExited(%q) = false after the child was reaped", token)
	}
}
