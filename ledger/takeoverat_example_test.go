package ledger_test

import (
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
)

// A repeat told that an action is in progress learns when its claim may
// be taken over: one liveness after the owner's last heartbeat, which is
// the pending record's LeaseUntil.
func ExampleRecord_TakeoverAt() {
	heartbeat := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rec := &ledger.Record{Key: "k", State: ledger.StatePending, Owner: "host-b/4242/1", LeaseUntil: heartbeat.Add(12 * time.Second)}
	fmt.Println("may be taken over at", rec.TakeoverAt().Format(time.TimeOnly))
	fmt.Println("lapsed 5 s after the heartbeat:", rec.LeaseExpired(heartbeat.Add(5*time.Second)))
	fmt.Println("lapsed 12 s after the heartbeat:", rec.LeaseExpired(heartbeat.Add(12*time.Second)))
	// Output:
	// may be taken over at 12:00:12
	// lapsed 5 s after the heartbeat: false
	// lapsed 12 s after the heartbeat: true
}
