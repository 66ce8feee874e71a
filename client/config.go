package client

import (
	"log/slog"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Config tunes an Executor. The zero value of each field selects its
// default.
type Config struct {
	// Liveness is how long a running claim stands after its last
	// heartbeat (default DefaultLiveness, 12 seconds): each claim and
	// each heartbeat sets the record's LeaseUntil to Liveness later (never
	// past the call's end, below). A call whose heartbeats stop for
	// Liveness (its process died, was paused, or lost the ledger) may be
	// taken over by another caller, who reconciles before acting; the
	// call's own tool context is cancelled (ErrLeaseLost) once its
	// heartbeats have failed for that long, and its late record write is
	// refused. Liveness bounds how long a repeat waits for a dead owner
	// anywhere, so keep it short, but several times the ledger's worst
	// write latency. See docs/liveness.md.
	Liveness time.Duration
	// Heartbeat is the interval between a running claim's heartbeats (a
	// Store.Extend each; default Liveness/3, and Liveness/3 as well when
	// it is not shorter than Liveness). A heartbeat that fails is retried
	// at half the time left until the claim lapses.
	Heartbeat time.Duration
	// Lease bounds how long one call holds its claim: the claim is not
	// renewed past Lease after it was taken, and the tool's context is
	// cancelled (ErrLeaseLost) then. Zero (the default): no bound but
	// the context's, so a call runs as long as its context allows while
	// its heartbeats keep the claim. The context's deadline always
	// bounds the claim: a Lambda invocation's claim lapses with the
	// invocation.
	Lease time.Duration
	// Retention is how long a done or failed record is kept, counted from
	// when it was settled (default 24 hours), whatever the lease: a record
	// settled after a long run is kept for the whole retention. Pending and
	// uncertain records are never dropped. Keep it at least as long as the
	// providers' deduplication windows.
	Retention time.Duration
	// Wait is how long a call waits for a duplicate in flight elsewhere to
	// finish before answering InProgress (default 2 seconds; negative: no
	// wait).
	Wait time.Duration
	// RecordTimeout bounds the retries of a record write after the tool ran
	// (default 10 seconds).
	RecordTimeout time.Duration
	// MaxInputBytes bounds a call's input (default 1 MiB).
	MaxInputBytes int
	// MaxResultBytes bounds the stored result payload (default 64 KiB, at
	// most ledger.MaxResultBytes). A larger result is not stored; the record
	// is marked Truncated and replays carry no payload.
	MaxResultBytes int
	// Clock tells the time (default: the system clock).
	Clock clock.Clock
	// NewOwner returns a fresh owner token per claim (default:
	// ledger.NewOwner, which names this process).
	NewOwner func() string
	// OwnerExited reports whether the owner token of a pending record
	// names a process known to have exited (default: ledger.OwnerExited,
	// which knows only this machine's processes). A call blocked by such a
	// record takes it over at once and reconciles, as after its lease;
	// otherwise it waits for the lease. A function that always reports
	// false always waits for the lease.
	OwnerExited func(owner string) bool
	// Logger receives structured events (default: discard): at Info one
	// "oncely call" per call with its outcome and latency, and the
	// takeovers and reconciliations; at Warn uncertain outcomes, writes
	// fenced off by a newer owner, failed lease renewals and lost leases;
	// at Debug claims, replays and in-process merges. Every event carries
	// the tool, run, action key and attempt.
	Logger *slog.Logger
	// LogInput adds the call's input to the events. Off by default: the
	// input may hold personal data.
	LogInput bool
	// Disabled runs every tool directly, without the ledger: no claim, no
	// replay, no merging, no reconciliation, so repeats are NOT
	// deduplicated by oncely (providers still get the downstream key).
	// It is an emergency switch, for example while the ledger is down and
	// the agent must go on. The environment variable ONCELY_DISABLED
	// (DisabledEnv) set to 1, true, yes or on sets it. New and every call log
	// a warning while it is on.
	Disabled bool
	// NoCounters turns the counter records off. By default the Executor
	// counts per tool what it executed, replayed, merged and reconciled, in
	// memory, and writes the counts at most once a minute as one small done
	// record per tool (tool and run ledger.CountersRun, kept 8 days), from a
	// timer, never on a call's path: the operator console's replay and
	// reconcile rates. Each costs the ledger what one fresh action costs
	// (a claim and a completion), per tool and minute, whatever the number
	// of calls; a replay itself still writes nothing. FlushCounters writes
	// them at once (before the process exits).
	NoCounters bool
}

// DefaultLiveness is the default Config.Liveness: a claim whose heartbeats
// stop is taken over 12 seconds after its last one.
const DefaultLiveness = 12 * time.Second

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Liveness <= 0 {
		d.Liveness = DefaultLiveness
	}
	if d.Heartbeat <= 0 || d.Heartbeat >= d.Liveness {
		d.Heartbeat = d.Liveness / 3
	}
	d.Lease = max(d.Lease, 0)
	if d.Retention <= 0 {
		d.Retention = 24 * time.Hour
	}
	if d.Wait == 0 {
		d.Wait = 2 * time.Second
	}
	if d.RecordTimeout <= 0 {
		d.RecordTimeout = 10 * time.Second
	}
	if d.MaxInputBytes <= 0 {
		d.MaxInputBytes = DefaultMaxInputBytes
	}
	if d.MaxResultBytes <= 0 {
		d.MaxResultBytes = 64 << 10
	}
	d.MaxResultBytes = min(d.MaxResultBytes, ledger.MaxResultBytes)
	if d.Clock == nil {
		d.Clock = clock.System{}
	}
	if d.NewOwner == nil {
		d.NewOwner = ledger.NewOwner
	}
	if d.OwnerExited == nil {
		d.OwnerExited = ledger.OwnerExited
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}
