package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// TestDisabledEnvValues: ONCELY_DISABLED takes the values users write,
// in any case; any other value is refused, not guessed at, without a
// panic: New returns, and Register and Execute fail with ErrDisabledEnv
// (an ErrHostInput), naming the variable, the value and the accepted
// values. Before, New panicked and the program died at start. (Not
// parallel: it sets the environment.)
func TestDisabledEnvValues(t *testing.T) {
	// runs calls the same action twice and returns how often the tool ran:
	// 2 when oncely is disabled, 1 otherwise.
	runs := func(t *testing.T) int64 {
		var n atomic.Int64
		exec := client.New(ledgermem.New(nil), &client.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := exec.Register(counted("send_reply", &n, nil)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		return n.Load()
	}
	for _, tc := range []struct {
		value string
		runs  int64 // 0: refused
	}{
		{"1", 2}, {"true", 2}, {"TRUE", 2}, {"Yes", 2}, {" yes\n", 2}, {"on", 2}, {"y", 2},
		{"", 1}, {"0", 1}, {"false", 1}, {"No", 1}, {"OFF", 1},
		{"enabled", 0}, {"ture", 0}, {"2", 0}, {"disabled", 0},
	} {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			t.Setenv(client.DisabledEnv, tc.value)
			if tc.runs > 0 {
				if got := runs(t); got != tc.runs {
					t.Errorf("%s=%q: the tool ran %d times, want %d", client.DisabledEnv, tc.value, got, tc.runs)
				}
				return
			}
			named := func(what string, err error) {
				t.Helper()
				msg := fmt.Sprint(err)
				if !errors.Is(err, client.ErrDisabledEnv) || !errors.Is(err, client.ErrHostInput) ||
					!strings.Contains(msg, client.DisabledEnv) || !strings.Contains(msg, fmt.Sprintf("%q", tc.value)) ||
					!strings.Contains(msg, "1, true, yes or on") || !strings.Contains(msg, "0, false, no, off") {
					t.Errorf("%s=%q: %s: %v; want ErrDisabledEnv naming the variable, the value and the accepted values", client.DisabledEnv, tc.value, what, err)
				}
			}
			var logged strings.Builder
			var n atomic.Int64
			exec := client.New(ledgermem.New(nil), &client.Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))}) // must not panic
			if !strings.Contains(logged.String(), client.DisabledEnv) {
				t.Errorf("New logged %q; want the variable named", logged.String())
			}
			named("Register", exec.Register(counted("send_reply", &n, nil)))
			res, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
			named("Execute", err)
			if res.Outcome != client.InvalidInput || !res.IsError || n.Load() != 0 {
				t.Errorf("Execute: %+v, the tool ran %d times; want InvalidInput and no run", res, n.Load())
			}
		})
	}
}
