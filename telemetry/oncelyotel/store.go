package oncelyotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncely/oncely/ledger"
)

// Store returns s with a span and a latency measurement per operation:
// oncely.claim, oncely.record (Complete and Fail), oncely.extend,
// oncely.get and oncely.list. It implements ledger.Purger when s does,
// and ledger.Watcher and ledger.RunIndexer always, with s's answers (Watch
// returns an error wrapping ledger.ErrNoWatch when s cannot watch).
func (in *Instruments) Store(s ledger.Store) ledger.Store {
	ts := &store{next: s, in: in}
	if p, ok := s.(ledger.Purger); ok {
		return &purgerStore{store: ts, purger: p}
	}
	return ts
}

type store struct {
	next ledger.Store
	in   *Instruments
}

// op runs one ledger operation in a span and times it.
func (s *store) op(ctx context.Context, name, op, key string, f func(context.Context) error, attrs ...attribute.KeyValue) error {
	if key != "" {
		attrs = append(attrs, attribute.String("oncely.key", key))
	}
	ctx, span := s.in.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, attribute.String("oncely.ledger.op", op))...))
	defer span.End()
	start := s.in.clock.Now()
	err := f(ctx)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) { // an absent record is an answer
		fail(span, err)
	}
	s.in.ledgerDur.Record(ctx, s.in.since(start), metric.WithAttributes(
		attribute.String("oncely.ledger.op", op), attribute.Bool("error", err != nil)))
	return err
}

func (s *store) Claim(ctx context.Context, p ledger.ClaimParams) (res ledger.ClaimResult, err error) {
	err = s.op(ctx, "oncely.claim", "claim", p.Key, func(ctx context.Context) error {
		res, err = s.next.Claim(ctx, p)
		if err == nil {
			span := trace.SpanFromContext(ctx)
			span.SetAttributes(attribute.Bool("oncely.claimed", res.Claimed))
			if res.Previous != nil {
				span.SetAttributes(attribute.String("oncely.previous_state", string(res.Previous.State)))
			}
		}
		return err
	}, attribute.String("oncely.tool", p.Tool))
	return res, err
}

func (s *store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	return s.op(ctx, "oncely.record", "complete", key, func(ctx context.Context) error {
		return s.next.Complete(ctx, key, owner, c)
	}, attribute.String("oncely.state", string(ledger.StateDone)))
}

func (s *store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	state := ledger.StateUncertain
	if f.Definite {
		state = ledger.StateFailed
	}
	return s.op(ctx, "oncely.record", "fail", key, func(ctx context.Context) error {
		return s.next.Fail(ctx, key, owner, f)
	}, attribute.String("oncely.state", string(state)))
}

func (s *store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	return s.op(ctx, "oncely.extend", "extend", key, func(ctx context.Context) error {
		return s.next.Extend(ctx, key, owner, leaseUntil)
	})
}

func (s *store) Get(ctx context.Context, key string) (rec *ledger.Record, err error) {
	err = s.op(ctx, "oncely.get", "get", key, func(ctx context.Context) error {
		rec, err = s.next.Get(ctx, key)
		return err
	})
	return rec, err
}

func (s *store) List(ctx context.Context, f ledger.Filter) (recs []ledger.Record, err error) {
	err = s.op(ctx, "oncely.list", "list", "", func(ctx context.Context) error {
		recs, err = s.next.List(ctx, f)
		return err
	}, attribute.String("oncely.state", string(f.State)))
	return recs, err
}

// Watch passes the watch to the wrapped store, untraced: a watch lasts as
// long as a wait, not a ledger operation.
func (s *store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w, ok := s.next.(ledger.Watcher)
	if !ok {
		return nil, nil, fmt.Errorf("oncelyotel: %T: %w", s.next, ledger.ErrNoWatch)
	}
	return w.Watch(ctx, key)
}

// RunsIndexed answers with the wrapped store's answer.
func (s *store) RunsIndexed() bool { return ledger.RunsIndexed(s.next) }

// purgerStore is a traced store whose backend purges.
type purgerStore struct {
	*store
	purger ledger.Purger
}

func (s *purgerStore) Purge(ctx context.Context, before time.Time) (n int, err error) {
	err = s.op(ctx, "oncely.purge", "purge", "", func(ctx context.Context) error {
		n, err = s.purger.Purge(ctx, before)
		return err
	})
	return n, err
}
