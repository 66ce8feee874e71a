// Package oncelyriver makes a River job's side effects happen once per
// action, across River's retries, its rescues of stuck jobs and duplicate
// inserts of the same work.
//
// New wraps a work function as a river.Worker. Each job is one oncely
// action, keyed by the job's id or by identity fields of its arguments
// (Options.Identity, JMESPath over {"id", "kind", "queue", "args"}): the
// first job of an action runs the function, with the action's downstream
// key (oncelyfunc.DownstreamKey) for the provider; a retry, a rescued job
// or a duplicate insert finds the action done and completes without
// running it, with the first run's output recorded again as the job's
// output (river.RecordOutput).
//
// # One transaction with ledgerpg
//
// Where the ledger is ledgerpg in the River database, give the executor a
// TxStore: the action's record and the job's completion then commit in
// one transaction (river.JobCompleteTx), so no crash can leave a done
// record with a running job, or a completed job without its record. On
// any other ledger the record is written first and River completes the
// job after the worker returns: a crash between the two leaves the job
// running, River rescues it, and the rescued attempt finds the record
// done and completes without running the function again.
//
// # Rescues and claims
//
// A claim lives at most as long as the job's context (the executor ties
// its lease to the context's deadline, River's JobTimeout), and River
// rescues a job that has run for RescueStuckJobsAfter. New refuses a
// configuration whose claim could still be live when River rescues the
// job (a JobTimeout of -1, or one not below RescueStuckJobsAfter), so that
// a rescued attempt always finds the claim ended and reconciles through
// the tool's Reconciler before acting again.
package oncelyriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/oncelyfunc"
)

// Options describe a worker made exactly-once.
type Options struct {
	// Identity selects what makes two jobs the same action, over the JSON
	// form of Input (default: "id", one action per job, which covers
	// retries and rescues). Select fields of the arguments, such as
	// "args.order_id", so that duplicate inserts of the same work are
	// one action too.
	Identity []oncelyfunc.Key
	// Validated, Retention and Reconciler are as in oncelyfunc.Options.
	Validated  []oncelyfunc.Key
	Retention  time.Duration
	Reconciler client.Reconciler
	// Timeout is the worker's own job timeout (river.Worker's Timeout;
	// default 0: the client's JobTimeout). It bounds the claim too.
	Timeout time.Duration
	// Snooze is how long a job whose action is in flight in another job
	// waits before it is worked again (default 5 seconds; river.JobSnooze).
	Snooze time.Duration
	// OnDeadLetter is called once for a job that River will not work
	// again: its last attempt failed, or its action failed permanently,
	// conflicts with a done one or has no usable identity (the job is
	// cancelled). err says why. Optional.
	OnDeadLetter func(ctx context.Context, job *rivertype.JobRow, err error)
	// Logger receives a warning, saying what an operator must do, for a
	// job whose action is uncertain or stuck (default: slog.Default()).
	Logger *slog.Logger
}

// Input is the JSON document the identity expressions select from.
type Input[T river.JobArgs] struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	Args  T      `json:"args"`

	job *river.Job[T]
}

// Job returns the River job of the input.
func (in Input[T]) Job() *river.Job[T] { return in.job }

// Worker is a river.Worker whose work runs once per action. Register it
// with river.AddWorker.
type Worker[T river.JobArgs, Out any] struct {
	river.WorkerDefaults[T]
	once    func(context.Context, Input[T]) (Out, client.Result, error)
	opts    Options
	log     *slog.Logger
	snooze  time.Duration
	timeout time.Duration
}

// Timeout is Options.Timeout (River's Worker interface).
func (w *Worker[T, Out]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

// New registers a tool named after T's kind with exec and returns a
// Worker that runs work once per action. cfg is the River client's
// configuration (its JobTimeout and RescueStuckJobsAfter are checked; nil
// means River's defaults). work's output is stored in the ledger and
// recorded as the job's output, on its first run and on every repeat.
//
// work's errors are classified as in oncelyfunc.Wrap: an unmarked error
// leaves the action uncertain (retried and reconciled), client.Definite
// marks one that did nothing (retried), client.Permanent one that never
// will succeed (the job is cancelled).
func New[T river.JobArgs, Out any](exec *client.Executor, cfg *river.Config, opts Options, work func(context.Context, *river.Job[T]) (Out, error)) (*Worker[T, Out], error) {
	var args T
	name := args.Kind()
	if work == nil {
		return nil, fmt.Errorf("oncelyriver: %s: nil work function", name)
	}
	if err := CheckRescue(cfg, opts.Timeout); err != nil {
		return nil, fmt.Errorf("oncelyriver: %s: %w", name, err)
	}
	identity := opts.Identity
	if len(identity) == 0 {
		identity = []oncelyfunc.Key{{Expr: "id"}}
	}
	once, err := oncelyfunc.WrapResult(exec, name, oncelyfunc.Options[Out]{
		Identity: identity, Validated: opts.Validated, Scope: client.ScopeGlobal,
		Retention: opts.Retention, Reconciler: opts.Reconciler,
		Summary: func(Out) string { return name + ": job done" },
	}, func(ctx context.Context, in Input[T]) (Out, error) {
		// Calls the work makes through an executor are actions of their
		// own: their completions never complete the job.
		out, err := work(context.WithValue(ctx, jobKey{}, (*completer)(nil)), in.job)
		if err == nil {
			recordOutput(ctx, out)
		}
		return out, err
	})
	if err != nil {
		return nil, err
	}
	log := cmp.Or(opts.Logger, slog.Default())
	return &Worker[T, Out]{once: once, opts: opts, log: log, snooze: cmp.Or(opts.Snooze, 5*time.Second), timeout: opts.Timeout}, nil
}

// CheckRescue reports an error, naming both values, when a claim could
// still be live when River rescues its job: the job's timeout (timeout,
// or cfg.JobTimeout, or River's default) is -1 (none) or not below
// cfg.RescueStuckJobsAfter (or River's default).
func CheckRescue(cfg *river.Config, timeout time.Duration) error {
	var c river.Config
	if cfg != nil {
		c = *cfg
	}
	jt := cmp.Or(timeout, c.JobTimeout, river.JobTimeoutDefault)
	rescue := c.RescueStuckJobsAfter
	if rescue <= 0 {
		rescue = time.Hour // River's default (maintenance.JobRescuerRescueAfterDefault)
		if c.JobTimeout > 0 && c.JobTimeout > rescue {
			rescue = c.JobTimeout + time.Hour
		}
	}
	if jt < 0 {
		return fmt.Errorf("the job timeout is -1 (none), so a claim is renewed for as long as the job runs, past RescueStuckJobsAfter (%v), when River rescues the job while its claim is live: set a JobTimeout below RescueStuckJobsAfter", rescue)
	}
	if jt >= rescue {
		return fmt.Errorf("the job timeout (%v) is not below RescueStuckJobsAfter (%v), so River could rescue a job while its claim is live: lower the timeout or raise RescueStuckJobsAfter", jt, rescue)
	}
	return nil
}

// Work runs the job's action once (River's Worker interface).
func (w *Worker[T, Out]) Work(ctx context.Context, job *river.Job[T]) error {
	in := Input[T]{ID: job.ID, Kind: job.Kind, Queue: job.Queue, Args: job.Args, job: job}
	cctx := context.WithValue(ctx, jobKey{}, &completer{complete: func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	}})
	out, res, err := w.once(cctx, in)
	switch {
	case res.Outcome == client.AlreadyDone || (res.Outcome == client.Executed && (err == nil || errors.Is(err, oncelyfunc.ErrResultNotKept))):
		if err == nil {
			// The run's output: this job's, or the first run's for a
			// repeat or a job merged with one in flight in this process.
			recordOutput(ctx, out)
		}
		faultPoint("done")
		return nil
	case res.Outcome == client.InProgress:
		return river.JobSnooze(w.snooze)
	}
	if err == nil {
		err = fmt.Errorf("oncelyriver: %s: %s", job.Kind, res.Outcome)
	}
	final := res.Outcome == client.Conflict || res.Outcome == client.InvalidInput || (res.Outcome == client.Failed && !res.Retryable)
	last := final || job.Attempt >= job.MaxAttempts
	if advice := advice(res, w.opts.Reconciler != nil, last); advice != "" {
		w.log.LogAttrs(ctx, slog.LevelWarn, "oncelyriver: job not done: "+advice,
			slog.String("kind", job.Kind), slog.Int64("job_id", job.ID), slog.Int("attempt", job.Attempt),
			slog.String("outcome", res.Outcome.String()), slog.String("key", res.Key), slog.Any("err", err))
	}
	if last && w.opts.OnDeadLetter != nil {
		w.opts.OnDeadLetter(ctx, job.JobRow, err)
	}
	if final {
		return river.JobCancel(err)
	}
	return err
}

// advice says what an operator must do about a job River may not settle;
// "" for one that a retry may handle.
func advice(res client.Result, reconciler, last bool) string {
	const resolve = "check whether the effect exists and settle the record with `oncely ledger resolve KEY --done` (or `--failed --reason TEXT`)"
	switch {
	case res.Outcome == client.Uncertain && last:
		return "its outcome is unknown, the effect may exist, and River will not retry it: " + resolve + ", then retry the job if it was not done."
	case res.Outcome == client.Uncertain && reconciler:
		return "its outcome is unknown and the effect may exist; the next attempt reconciles it."
	case res.Outcome == client.Uncertain:
		return "its outcome is unknown and the effect may exist; without a Reconciler every attempt finds it so: " + resolve + "."
	case res.Outcome == client.InvalidInput:
		return "its identity is missing or unusable; the job is cancelled."
	case res.Outcome == client.Conflict:
		return "its action was done with other validated values; the job is cancelled, not run."
	case res.Outcome == client.Failed && !res.Retryable:
		return "its work failed permanently; the job is cancelled."
	case last:
		return "its last attempt failed; River discards it."
	}
	return ""
}

func recordOutput(ctx context.Context, out any) {
	// Outside a River worker (a unit test of the function) there is no
	// output to record.
	_ = river.RecordOutput(ctx, out)
}

type jobKey struct{}

// completer completes the job of the action being recorded, in the
// transaction that records it.
type completer struct {
	complete func(ctx context.Context, tx pgx.Tx) error
}

// TxStore is a ledgerpg Store whose completion of an action run by a
// Worker also completes the Worker's River job, in one transaction on
// pool (the River client's pool: the ledger's table must be in River's
// database). Every other call, and the completion of any other action
// (those the work makes itself, the executor's counters), is the
// ledgerpg Store's. Give it to client.New in place of the Store.
type TxStore struct {
	*ledgerpg.Store
	pool *pgxpool.Pool
}

// NewTxStore returns a TxStore over s, completing jobs in transactions on
// pool.
func NewTxStore(s *ledgerpg.Store, pool *pgxpool.Pool) *TxStore {
	return &TxStore{Store: s, pool: pool}
}

// Complete records the action done; for a Worker's action, in the
// transaction that completes its job (river.JobCompleteTx). A job that is
// no longer running (cancelled, or settled by River meanwhile) is left as
// it is and the record is committed alone. When the record is no longer
// this owner's (the claim was taken over), it returns ledger.ErrNotOwner
// and writes neither: the job is left to the attempt that took it over.
// When the transaction fails, neither is written, and the executor
// retries.
func (s *TxStore) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	jc, _ := ctx.Value(jobKey{}).(*completer)
	if jc == nil {
		return s.Store.Complete(ctx, key, owner, c)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.Store.InTx(tx).Complete(ctx, key, owner, c); err != nil {
			return err
		}
		faultPoint("recorded")
		// A job no longer running (cancelled by an operator, or settled by
		// River meanwhile) is left as it is; the record commits all the
		// same: the effect happened.
		if err := jc.complete(ctx, tx); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("oncelyriver: complete the job with its action %s: %w", key, err)
		}
		faultPoint("job-completed")
		return nil
	})
	if err == nil {
		faultPoint("committed")
	}
	return err
}

// faultPoint marks the points between an effect and its job's completion
// where the crash tests kill their process (a no-op otherwise).
var faultPoint = func(string) {}
