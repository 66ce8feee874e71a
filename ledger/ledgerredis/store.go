package ledgerredis

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/internal/listmerge"
	"github.com/idemkit/idemkit/ledger"
)

// Buckets is the number of buckets the records are spread over. Each
// bucket has its own hash tag, so on Redis Cluster or Valkey Cluster the
// ledger spans up to this many hash slots. It is part of the key layout.
const Buckets = 16

// Defaults of Config.
const (
	DefaultPrefix       = "idem"
	DefaultWaitTimeout  = time.Second
	DefaultPendingGrace = 7 * 24 * time.Hour
)

// listPage is how many index entries one run of the list script reads, so
// that no script holds the server for long.
const listPage = 256

// ErrNotReplicated: fewer replicas than Config.WaitReplicas acknowledged a
// write within Config.WaitTimeout. The write took effect on the primary
// but may be lost on a failover. It wraps ledger.ErrUnavailable.
var ErrNotReplicated = errors.New("ledgerredis: write not acknowledged by enough replicas")

// Config tunes a Store. The zero value selects the defaults.
type Config struct {
	// Clock tells the time (default: the system clock). Leases and
	// retention are compared with it, not with the server's clock.
	Clock clock.Clock
	// Prefix starts every key of the ledger (default "idem"). Stores that
	// share a ledger use the same prefix; different prefixes are separate
	// ledgers on one server.
	Prefix string
	// WaitReplicas, when above zero, sends WAIT after every write, in the
	// same round trip, and fails the call with ErrNotReplicated when fewer
	// replicas acknowledged it within WaitTimeout.
	WaitReplicas int
	// WaitTimeout bounds WAIT (default 1 s).
	WaitTimeout time.Duration
	// PendingGrace is how long a pending record is kept beyond its
	// retention and lease (default 7 days): a claim within it takes the
	// abandoned record over and reconciles; after it the key is gone and
	// a claim starts afresh.
	PendingGrace time.Duration
}

// Store is a ledger.Store on a Redis or Valkey server (or cluster). It is
// safe for concurrent use, also by other processes sharing the server.
type Store struct {
	c            redis.UniversalClient
	clock        clock.Clock
	prefix       string
	wait         int
	waitTimeout  time.Duration
	pendingGrace int64 // ms

	// owned is the client OpenURL made, which Close closes; nil for a
	// client of the caller's.
	owned *redis.Client

	reindexMu sync.Mutex
	reindexed bool // every bucket's state indexes are complete (indexed)
}

var (
	_ ledger.Store = (*Store)(nil)
	_ io.Closer    = (*Store)(nil)
)

// New returns a Store on client. The client stays the caller's: closing it
// is the caller's job.
func New(client redis.UniversalClient, cfg *Config) *Store {
	s := &Store{c: client, clock: clock.System{}, prefix: DefaultPrefix,
		waitTimeout: DefaultWaitTimeout, pendingGrace: DefaultPendingGrace.Milliseconds()}
	if cfg == nil {
		return s
	}
	if cfg.Clock != nil {
		s.clock = cfg.Clock
	}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix
	}
	s.wait = cfg.WaitReplicas
	if cfg.WaitTimeout > 0 {
		s.waitTimeout = cfg.WaitTimeout
	}
	if cfg.PendingGrace > 0 {
		s.pendingGrace = cfg.PendingGrace.Milliseconds()
	}
	return s
}

// OpenURL connects to the server at rawurl, checks that it answers, and
// returns a Store on it, whose Close closes the connections.
//
// The URL is what go-redis's ParseURL reads (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix://), plus three parameters of the store, which
// override cfg: prefix (Config.Prefix), wait (Config.WaitReplicas) and
// wait_timeout (Config.WaitTimeout, a Go duration). For example
// redis://127.0.0.1:6379/0?prefix=agents&wait=1.
//
// A server that cannot be reached is an error matching
// ledger.ErrUnavailable. go-redis also prints each failed dial through its
// logger, which is one for the whole process (redis.SetLogger); OpenURL
// leaves it as the program set it. A program that reports the errors
// itself silences it with redis.SetLogger(&logging.VoidLogger{}), as the
// idem command does.
func OpenURL(ctx context.Context, rawurl string, cfg *Config) (*Store, error) {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	u, err := url.Parse(rawurl)
	if err != nil {
		return nil, fmt.Errorf("%w: ledgerredis: %v", ledger.ErrConfig, err)
	}
	q := u.Query()
	if v := q.Get("prefix"); v != "" {
		c.Prefix = v
	}
	if v := q.Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: ledgerredis: wait=%q is not a number of replicas", ledger.ErrConfig, v)
		}
		c.WaitReplicas = n
	}
	if v := q.Get("wait_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: ledgerredis: wait_timeout=%q is not a positive duration", ledger.ErrConfig, v)
		}
		c.WaitTimeout = d
	}
	for _, p := range []string{"prefix", "wait", "wait_timeout"} {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ledger.ErrConfig, err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, unavailable(err)
	}
	s := New(client, &c)
	s.owned = client
	return s, nil
}

// Close closes the client OpenURL made. A Store made by New leaves its
// client open: it is the caller's.
func (s *Store) Close() error {
	if s.owned == nil {
		return nil
	}
	return s.owned.Close()
}

// unavailable wraps an error of the server or the connection.
func unavailable(err error) error {
	return fmt.Errorf("ledgerredis: %w: %w", ledger.ErrUnavailable, err)
}

// ms is t in Unix milliseconds, as the record stores it.
func ms(t time.Time) int64 { return t.UnixMilli() }

// bucket returns the hash tag part of the keys of key's bucket.
func (s *Store) bucket(key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return s.tag(int(h.Sum32() % Buckets))
}

// tag returns the start of every key of bucket b: "{prefix:b}:".
func (s *Store) tag(b int) string { return "{" + s.prefix + ":" + strconv.Itoa(b) + "}:" }

// keys returns the record key and the bucket's index keys, as the write
// scripts take them.
func (s *Store) keys(key string) []string {
	t := s.bucket(key)
	return []string{t + "r:" + key, t + "pending", t + "all", t + "uncertain", t + "done", t + "failed"}
}

// stateIndex returns the key of bucket b's index of the records in state.
func (s *Store) stateIndex(b int, state ledger.State) string { return s.tag(b) + string(state) }

// run runs a script on the keys of one bucket, followed in the same round
// trip by WAIT when the store waits for replicas.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.wait <= 0 {
		v, err := script.Run(ctx, s.c, keys, args...).Result()
		if err != nil {
			return nil, unavailable(err)
		}
		return v, nil
	}
	// WAIT names no key: on a cluster it must go to the primary of the
	// record's slot, with the script.
	var conn redis.Cmdable = s.c
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, unavailable(err)
		}
		conn = node
	}
	eval, wait, err := pipeWait(ctx, conn, script.EvalSha, keys, args, s.wait, s.waitTimeout)
	if redis.HasErrorPrefix(eval.Err(), "NOSCRIPT") {
		eval, wait, err = pipeWait(ctx, conn, script.Eval, keys, args, s.wait, s.waitTimeout)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	if n, _ := wait.Int64(); n < int64(s.wait) {
		return nil, fmt.Errorf("%w: %w: %d of %d replicas within %v", ledger.ErrUnavailable, ErrNotReplicated, n, s.wait, s.waitTimeout)
	}
	return eval.Val(), nil
}

// pipeWait sends a script (through eval: EVALSHA or EVAL) and WAIT in one
// pipeline.
func pipeWait(ctx context.Context, conn redis.Cmdable, eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd,
	keys []string, args []any, replicas int, timeout time.Duration) (*redis.Cmd, *redis.Cmd, error) {
	var e, w *redis.Cmd
	_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		e = eval(ctx, p, keys, args...)
		w = p.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
		return nil
	})
	return e, w, err
}

// Claim implements ledger.Store.
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.ClaimResult{}, err
	}
	now := ms(s.clock.Now())
	v, err := s.run(ctx, claimScript, s.keys(p.Key), p.Key, now, p.Owner, ms(p.LeaseUntil), ms(p.ExpiresAt),
		p.Tool, p.RunID, p.Fingerprint, s.pendingGrace, p.Abandoned)
	if err != nil {
		return ledger.ClaimResult{}, err
	}
	reply, ok := v.([]any)
	if !ok || len(reply) < 2 {
		return ledger.ClaimResult{}, unexpected(v)
	}
	if claimed, _ := reply[0].(int64); claimed == 0 {
		prev, err := decode(p.Key, reply[1])
		if err != nil {
			return ledger.ClaimResult{}, err
		}
		return ledger.Refused(prev, p.Owner), nil
	}
	if len(reply) != 4 {
		return ledger.ClaimResult{}, unexpected(v)
	}
	attempt, err := strconv.Atoi(str(reply[1]))
	if err != nil {
		return ledger.ClaimResult{}, unexpected(v)
	}
	res := ledger.ClaimResult{Claimed: true, Attempt: attempt}
	if flat, _ := reply[3].([]any); len(flat) > 0 {
		if res.Previous, err = decode(p.Key, flat); err != nil {
			return ledger.ClaimResult{}, err
		}
	}
	return res, nil
}

// write runs one of the owner-conditional scripts.
func (s *Store) write(ctx context.Context, script *redis.Script, key, owner string, args ...any) error {
	if key == "" || owner == "" {
		return fmt.Errorf("ledgerredis: %w: key and owner are required", ledger.ErrInvalid)
	}
	v, err := s.run(ctx, script, s.keys(key), append([]any{key, ms(s.clock.Now()), owner}, args...)...)
	if err != nil {
		return err
	}
	switch v {
	case int64(1):
		return nil
	case int64(0):
		return ledger.ErrNotOwner
	}
	return unexpected(v)
}

// Complete implements ledger.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return s.write(ctx, completeScript, key, owner, c.Summary, c.Ref, c.Result, flag(c.Truncated), s.pendingGrace, c.Retention.Milliseconds())
}

// Fail implements ledger.Store.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return s.write(ctx, failScript, key, owner, f.Reason, flag(f.Definite), s.pendingGrace, f.Retention.Milliseconds())
}

// Extend implements ledger.Store. It raises the record's retention to the
// new lease end when that is later, so that a live lease never outlives
// the record.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if leaseUntil.IsZero() {
		return fmt.Errorf("ledgerredis: %w: lease is required", ledger.ErrInvalid)
	}
	return s.write(ctx, extendScript, key, owner, ms(leaseUntil), s.pendingGrace)
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" {
		return nil, fmt.Errorf("ledgerredis: %w: key is required", ledger.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := s.c.HGetAll(ctx, s.keys(key)[0]).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	if len(m) == 0 {
		return nil, ledger.ErrNotFound
	}
	r, err := fromMap(key, m)
	if err != nil {
		return nil, err
	}
	if r.Expired(s.clock.Now()) {
		return nil, ledger.ErrNotFound
	}
	return r, nil
}

// List implements ledger.Store. Each bucket keeps an index of each
// state's records by lease end; List reads the indexes of the states the
// filter asks for, every bucket's, pipelined, and merges them in cursor
// order, so that its cost grows with the page and the records of those
// states, not with the whole ledger. A filter on the run is applied to the
// records read.
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.indexed(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	states := []ledger.State{ledger.StatePending, ledger.StateUncertain, ledger.StateDone, ledger.StateFailed}
	if f.State != "" {
		states = []ledger.State{f.State}
	}
	leaseBefore := ""
	if !f.LeaseBefore.IsZero() {
		// lease_until < LeaseBefore at millisecond precision: a stored
		// millisecond m is before t exactly when m < ceil_ms(t).
		before := ms(f.LeaseBefore)
		if f.LeaseBefore.After(time.UnixMilli(before)) {
			before++
		}
		leaseBefore = strconv.FormatInt(before, 10)
	}
	fetch := func(ctx context.Context, reqs []listmerge.Request) ([]listmerge.Reply, error) {
		now := ms(s.clock.Now())
		args := func(r listmerge.Request) (string, []any) {
			b, state := r.Source/len(states), states[r.Source%len(states)]
			afterLease := ""
			if !r.After.IsZero() {
				afterLease = strconv.FormatInt(ms(r.After.LeaseUntil), 10)
			}
			return s.stateIndex(b, state), []any{s.tag(b) + "r:", now, string(state), f.RunID, leaseBefore,
				afterLease, r.After.Key, r.N, listPage}
		}
		cmds := make([]*redis.Cmd, len(reqs))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, r := range reqs {
				index, a := args(r)
				cmds[i] = listScript.EvalSha(ctx, p, []string{index}, a...)
			}
			return nil
		})
		if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, unavailable(err)
		}
		replies := make([]listmerge.Reply, len(reqs))
		for i, cmd := range cmds {
			if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
				index, a := args(reqs[i])
				cmd = listScript.Run(ctx, s.c, []string{index}, a...)
			}
			v, err := cmd.Slice()
			if err != nil {
				return nil, unavailable(err)
			}
			if replies[i], err = listReply(v, reqs[i].After); err != nil {
				return nil, err
			}
		}
		return replies, nil
	}
	return listmerge.Merge(ctx, Buckets*len(states), f.After, limit, fetch)
}

// listReply reads a reply of listScript to a request after the cursor.
func listReply(v []any, after ledger.Cursor) (listmerge.Reply, error) {
	if len(v) < 3 || len(v)%2 != 1 {
		return listmerge.Reply{}, unexpected(v)
	}
	done, _ := v[0].(int64)
	rep := listmerge.Reply{Done: done == 1, Next: after}
	if lease, err := strconv.ParseInt(str(v[1]), 10, 64); err == nil {
		rep.Next = ledger.Cursor{LeaseUntil: time.UnixMilli(lease).UTC(), Key: str(v[2])}
	}
	for i := 3; i < len(v); i += 2 {
		r, err := decode(str(v[i]), v[i+1])
		if err != nil {
			return listmerge.Reply{}, err
		}
		rep.Records = append(rep.Records, *r)
	}
	return rep, nil
}

// indexed makes sure, once per Store, that every bucket's state indexes
// hold the records written before those indexes existed (by a version of
// this package that kept only the pending index and the index of all
// records): a bucket without its marker key is walked once, a page of its
// records per script run, and then marked for as long as its index of all
// records lives. Walking again is harmless.
func (s *Store) indexed(ctx context.Context) error {
	s.reindexMu.Lock()
	defer s.reindexMu.Unlock()
	if s.reindexed {
		return nil
	}
	for b := range Buckets {
		t := s.tag(b)
		n, err := s.c.Exists(ctx, t+"indexed").Result()
		if err != nil {
			return unavailable(err)
		}
		if n == 1 {
			continue
		}
		keys := []string{t + "all", t + "pending", t + "uncertain", t + "done", t + "failed"}
		score, member := "", ""
		for {
			v, err := reindexScript.Run(ctx, s.c, keys, t+"r:", score, member, listPage).Slice()
			if err != nil {
				return unavailable(err)
			}
			if len(v) != 3 {
				return unexpected(v)
			}
			score, member = str(v[1]), str(v[2])
			if done, _ := v[0].(int64); done == 1 {
				break
			}
		}
		ttl, err := s.c.PTTL(ctx, t+"all").Result()
		if err != nil {
			return unavailable(err)
		}
		if ttl <= 0 {
			ttl = time.Duration(s.pendingGrace) * time.Millisecond
		}
		if err := s.c.Set(ctx, t+"indexed", "1", ttl).Err(); err != nil {
			return unavailable(err)
		}
	}
	s.reindexed = true
	return nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func unexpected(v any) error {
	return fmt.Errorf("ledgerredis: %w: unexpected reply %.200v", ledger.ErrUnavailable, v)
}

// decode reads the record of key from a script's flat HGETALL reply.
func decode(key string, v any) (*ledger.Record, error) {
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return nil, unexpected(v)
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		m[str(flat[i])] = str(flat[i+1])
	}
	return fromMap(key, m)
}

// fromMap reads the record of key from its hash fields.
func fromMap(key string, m map[string]string) (*ledger.Record, error) {
	var bad []string
	num := func(f string) int64 {
		n, err := strconv.ParseInt(m[f], 10, 64)
		if err != nil {
			bad = append(bad, f)
		}
		return n
	}
	when := func(f string) time.Time { return time.UnixMilli(num(f)).UTC() }
	r := &ledger.Record{
		Key:         key,
		Tool:        m["t"],
		RunID:       m["u"],
		State:       ledger.State(m["s"]),
		Owner:       m["o"],
		LeaseUntil:  when("l"),
		ExpiresAt:   when("e"),
		Fingerprint: m["f"],
		Attempt:     int(num("a")),
		AttemptAt:   when("at"),
		Summary:     m["m"],
		Ref:         m["r"],
		Truncated:   m["z"] == "1",
		Reason:      m["n"],
		UpdatedAt:   when("w"),
	}
	if x := m["x"]; x != "" {
		r.Result = []byte(x)
	}
	if !r.State.Valid() || len(bad) > 0 {
		return nil, fmt.Errorf("ledgerredis: %w: malformed record %s (state %q, fields %s)",
			ledger.ErrUnavailable, key, m["s"], strings.Join(bad, ", "))
	}
	return r, nil
}
