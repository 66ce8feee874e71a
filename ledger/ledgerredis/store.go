package ledgerredis

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/listmerge"
	"github.com/oncely/oncely/ledger"
)

// Buckets is the number of buckets the records are spread over in the
// layout of a Store whose Config.Spread is LegacySpread (the layout of
// every ledger before Spread was the default). Each bucket has its own
// hash tag, {prefix:b}, so on Redis Cluster or Valkey Cluster the ledger
// spans up to this many hash slots, placed where the tags hash (4, 8 and
// 4 of the 16 on three masters). It is part of the key layout.
const Buckets = 16

// MaxSpread is the largest Config.Spread.
const MaxSpread = 256

// DefaultSpread is the number of buckets of a Store whose Config.Spread
// is zero: as many as Buckets (a listing reads each bucket), placed
// evenly, so that the masters of a cluster that own equal ranges of slots
// hold equal shares within one (5, 5 and 6 on three masters).
const DefaultSpread = 16

// LegacySpread, as Config.Spread, selects the layout of Buckets buckets
// placed where their tags hash: for ledgers written with it.
const LegacySpread = -1

// Defaults of Config.
const (
	DefaultPrefix       = "oncely"
	DefaultWaitTimeout  = time.Second
	DefaultPendingGrace = 7 * 24 * time.Hour
)

// listPage is how many index entries one run of the list script reads, so
// that no script holds the server for long.
const listPage = 256

// purgePage is how many index entries one step of Purge reads; each is
// then checked, and deleted when expired, by a script of its own.
const purgePage = 256

// ErrNotReplicated: fewer replicas than Config.WaitReplicas acknowledged a
// write within Config.WaitTimeout. The write took effect on the primary
// but may be lost on a failover. It wraps ledger.ErrUnavailable.
var ErrNotReplicated = errors.New("ledgerredis: write not acknowledged by enough replicas")

// Config tunes a Store. The zero value selects the defaults.
type Config struct {
	// Clock tells the time (default: the system clock). Leases and
	// retention are compared with it, not with the server's clock.
	Clock clock.Clock
	// Prefix starts every key of the ledger (default "oncely"). Stores that
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
	// Durability is what OpenURL and Check require of the server's
	// configuration (default DurabilityPowerLoss).
	Durability Durability
	// Spread (default DefaultSpread, at most MaxSpread) spreads the
	// records over that many buckets whose hash tags are chosen so that
	// their slots lie at the middles of as many equal ranges of the 16384
	// slots of a cluster: masters that own equal contiguous ranges (what
	// redis-cli --cluster create makes) hold equal shares of the buckets,
	// within one. LegacySpread keeps the layout of ledgers written before
	// this was the default, Buckets buckets placed where their tags hash
	// (4, 8 and 4 of the 16 on three masters). It is part of the key layout:
	// every Store of a ledger uses the same value, and a ledger that holds
	// records keeps the value it was written with (a Store with another
	// value does not find them). New clamps it to MaxSpread.
	Spread int
}

// Durability is what OpenURL and Store.Check require of the server's
// configuration before the ledger is used: a server that can lose or
// evict an acknowledged claim lets an action run twice.
type Durability int

const (
	// DurabilityPowerLoss, the default, requires appendonly yes,
	// appendfsync always and maxmemory-policy noeviction: an acknowledged
	// write survives a power loss of the server's machine, and no record
	// is evicted. A server that refuses CONFIG GET (many managed services)
	// cannot show its appendfsync, and is refused at this level.
	DurabilityPowerLoss Durability = iota
	// DurabilityRestart requires appendonly yes (any appendfsync) and
	// maxmemory-policy noeviction, both read from INFO: an acknowledged
	// write survives a restart or crash of the server process, not of its
	// machine (with appendfsync everysec, about the last second of writes
	// is lost).
	DurabilityRestart
	// DurabilityUnchecked checks nothing: for a server whose durability
	// lies elsewhere (a managed service whose replication you accept) and
	// for tests. What a crash then loses is described in the package's
	// README.
	DurabilityUnchecked
)

// String returns the name of d as the URL parameter durability takes it:
// power_loss, restart or unchecked.
func (d Durability) String() string {
	switch d {
	case DurabilityPowerLoss:
		return "power_loss"
	case DurabilityRestart:
		return "restart"
	case DurabilityUnchecked:
		return "unchecked"
	}
	return "Durability(" + strconv.Itoa(int(d)) + ")"
}

// DurabilityError: the server's configuration does not give the
// Durability the store requires. It matches ledger.ErrConfig.
type DurabilityError struct {
	// Addr is the server refused (on a cluster, the master).
	Addr string
	// Setting is the server setting at fault (appendonly, appendfsync,
	// maxmemory-policy), Value what the server has ("" when it could not
	// be read) and Want what the required Durability needs.
	Setting, Value, Want string
	// Required is the Durability the store requires.
	Required Durability
	// Err is why the setting could not be read, if it could not.
	Err error
}

// Error names the setting, what it is, and the fix.
func (e *DurabilityError) Error() string {
	have := fmt.Sprintf("%s is %s", e.Setting, e.Value)
	if e.Value == "" {
		have = fmt.Sprintf("%s cannot be read (%v)", e.Setting, e.Err)
	}
	accept := "durability=unchecked"
	if e.Setting == "appendfsync" {
		accept = "durability=restart (a crash of the machine loses the last writes) or durability=unchecked"
	}
	return fmt.Sprintf("ledgerredis: %v: the server at %s would lose or evict claims: %s, durability %s needs %s %s "+
		"(set it in the server's configuration, e.g. CONFIG SET %s %s and CONFIG REWRITE; "+
		"or accept the loss with Config.Durability or the URL parameter %s)",
		ledger.ErrConfig, e.Addr, have, e.Required, e.Setting, e.Want, e.Setting, e.Want, accept)
}

// Unwrap returns ledger.ErrConfig and the error that kept the setting
// from being read, if any.
func (e *DurabilityError) Unwrap() []error {
	if e.Err != nil {
		return []error{ledger.ErrConfig, e.Err}
	}
	return []error{ledger.ErrConfig}
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
	durability   Durability
	tags         []string // the start of each bucket's keys: "{tag}:"

	// owned is the client OpenURL made, which Close closes; nil for a
	// client of the caller's.
	owned *redis.Client

	reindexMu sync.Mutex
	reindexed bool // every bucket's state and run indexes are complete (indexed)

	// runs holds the run of each record this Store claimed and has not
	// settled (runOf), at most runCacheSize.
	runsMu sync.Mutex
	runs   map[string]string

	watching *watching // Watch (watch.go)
}

var (
	_ ledger.Store  = (*Store)(nil)
	_ ledger.Purger = (*Store)(nil)
	_ io.Closer     = (*Store)(nil)
)

// New returns a Store on client. The client stays the caller's: closing it
// is the caller's job. New does not look at the server: call Store.Check
// to refuse a server that could lose or evict claims, as OpenURL does.
func New(client redis.UniversalClient, cfg *Config) *Store {
	s := &Store{c: client, clock: clock.System{}, prefix: DefaultPrefix, watching: &watching{},
		waitTimeout: DefaultWaitTimeout, pendingGrace: DefaultPendingGrace.Milliseconds()}
	s.tags = spreadTags(s.prefix, DefaultSpread)
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
	s.durability = cfg.Durability
	switch {
	case cfg.Spread > 0:
		s.tags = spreadTags(s.prefix, min(cfg.Spread, MaxSpread))
	case cfg.Spread < 0:
		s.tags = legacyTags(s.prefix)
	default:
		s.tags = spreadTags(s.prefix, DefaultSpread)
	}
	return s
}

// legacyTags returns the keys' starts of the Buckets buckets of the layout
// of a Store without Spread: "{prefix:b}:".
func legacyTags(prefix string) []string {
	tags := make([]string, Buckets)
	for b := range tags {
		tags[b] = "{" + prefix + ":" + strconv.Itoa(b) + "}:"
	}
	return tags
}

// spreadTags returns the keys' starts of n buckets whose hash slots lie
// at the middles of n equal ranges of the slots: bucket b's tag is
// "prefix:b.j" with the first j whose slot lies in the middle half of the
// b-th range.
func spreadTags(prefix string, n int) []string {
	tags := make([]string, n)
	for b := range tags {
		lo, hi := (4*b+1)*slots/(4*n), (4*b+3)*slots/(4*n)
		for j := 0; ; j++ {
			tag := prefix + ":" + strconv.Itoa(b) + "." + strconv.Itoa(j)
			if slot := int(crc16(tag)) % slots; slot >= lo && slot < hi {
				tags[b] = "{" + tag + "}:"
				break
			}
		}
	}
	return tags
}

// slots is the number of hash slots of a cluster.
const slots = 16384

// crc16 is the CRC16 of a cluster's key hash slots (XMODEM: polynomial
// 0x1021, initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Check reads the server's configuration (on a cluster, every master's)
// and returns a *DurabilityError when it does not give Config.Durability:
// appendonly (INFO persistence), maxmemory-policy (INFO memory) and, for
// DurabilityPowerLoss, appendfsync (CONFIG GET). OpenURL calls it; a
// program that makes its Store with New calls it before using the store.
// A server that cannot be reached is an error matching
// ledger.ErrUnavailable.
func (s *Store) Check(ctx context.Context) error {
	if s.durability == DurabilityUnchecked {
		return nil
	}
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return checkServer(ctx, node, node.Options().Addr, s.durability)
		})
	}
	addr := ""
	if c, ok := s.c.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return checkServer(ctx, s.c, addr, s.durability)
}

// checkServer checks one server's configuration against d.
func checkServer(ctx context.Context, c redis.Cmdable, addr string, d Durability) error {
	info, err := c.Info(ctx, "persistence", "memory").Result()
	if err != nil {
		return unavailable(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	refuse := func(setting, value, want string, err error) error {
		return &DurabilityError{Addr: addr, Setting: setting, Value: value, Want: want, Required: d, Err: err}
	}
	switch aof, ok := fields["aof_enabled"]; {
	case !ok:
		return refuse("appendonly", "", "yes", errors.New("INFO persistence has no aof_enabled"))
	case aof != "1":
		return refuse("appendonly", "no", "yes", nil)
	}
	policy, ok := fields["maxmemory_policy"]
	if !ok {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return refuse("maxmemory-policy", "", "noeviction", err)
		}
		policy = v["maxmemory-policy"]
	}
	if policy != "noeviction" {
		return refuse("maxmemory-policy", policy, "noeviction", nil)
	}
	if d == DurabilityPowerLoss {
		v, err := c.ConfigGet(ctx, "appendfsync").Result()
		if err == nil && v["appendfsync"] == "" {
			err = errors.New("CONFIG GET appendfsync answered nothing")
		}
		if err != nil {
			return refuse("appendfsync", "", "always", err)
		}
		if v["appendfsync"] != "always" {
			return refuse("appendfsync", v["appendfsync"], "always", nil)
		}
	}
	return nil
}

// OpenURL connects to the server at rawurl, checks that its configuration
// gives Config.Durability (Store.Check), and returns a Store on it, whose
// Close closes the connections.
//
// The URL is what go-redis's ParseURL reads (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix://), plus five parameters of the store, which
// override cfg: prefix (Config.Prefix), wait (Config.WaitReplicas),
// wait_timeout (Config.WaitTimeout, a Go duration), durability
// (Config.Durability: power_loss, restart or unchecked) and spread
// (Config.Spread). For example
// redis://127.0.0.1:6379/0?prefix=agents&wait=1.
//
// A server whose configuration does not give the durability is refused
// with a *DurabilityError (matching ledger.ErrConfig) that names the
// setting and the fix.
//
// A server that cannot be reached is an error matching
// ledger.ErrUnavailable. go-redis also prints each failed dial through its
// logger, which is one for the whole process (redis.SetLogger); OpenURL
// leaves it as the program set it. A program that reports the errors
// itself silences it with redis.SetLogger(&logging.VoidLogger{}), as the
// oncely command does.
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
	if v := q.Get("durability"); v != "" {
		d, ok := map[string]Durability{"power_loss": DurabilityPowerLoss, "restart": DurabilityRestart, "unchecked": DurabilityUnchecked}[v]
		if !ok {
			return nil, fmt.Errorf("%w: ledgerredis: durability=%q is not power_loss, restart or unchecked", ledger.ErrConfig, v)
		}
		c.Durability = d
	}
	if v := q.Get("spread"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxSpread {
			return nil, fmt.Errorf("%w: ledgerredis: spread=%q is not a number of buckets from 1 to %d", ledger.ErrConfig, v, MaxSpread)
		}
		c.Spread = n
	}
	for _, p := range []string{"prefix", "wait", "wait_timeout", "durability", "spread"} {
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
	if err := s.Check(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the client OpenURL made. A Store made by New leaves its
// client open: it is the caller's.
func (s *Store) Close() error {
	err := s.closeWatch()
	if s.owned == nil {
		return err
	}
	return errors.Join(err, s.owned.Close())
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
	return s.tag(int(h.Sum32() % uint32(len(s.tags))))
}

// tag returns the start of every key of bucket b: "{tag}:".
func (s *Store) tag(b int) string { return s.tags[b] }

// keys returns the record key and the bucket's index keys, the index of
// the run run last, as the write scripts take them.
func (s *Store) keys(key, run string) []string {
	t := s.bucket(key)
	return []string{t + "r:" + key, t + "pending", t + "all", t + "uncertain", t + "done", t + "failed", t + "u:" + run}
}

// recordKey returns the key of the record of key.
func (s *Store) recordKey(key string) string { return s.bucket(key) + "r:" + key }

// runIndex returns the key of bucket b's index of the records of run.
func (s *Store) runIndex(b int, run string) string { return s.tag(b) + "u:" + run }

// runCacheSize bounds the Store's memory of the runs of the records it
// claimed (runOf).
const runCacheSize = 1 << 16

// runOf returns the run of the record of key as this Store claimed it,
// or "" when it does not know: the owner-conditional scripts declare that
// run's index, and a record of another run costs one more round trip.
func (s *Store) runOf(key string) string {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return s.runs[key]
}

// setRun remembers (run != "") or forgets the run of key.
func (s *Store) setRun(key, run string, known bool) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if !known || run == "" {
		delete(s.runs, key)
		return
	}
	if s.runs == nil || len(s.runs) >= runCacheSize {
		s.runs = map[string]string{}
	}
	s.runs[key] = run
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
	v, err := s.run(ctx, claimScript, s.keys(p.Key, p.RunID), p.Key, now, p.Owner, ms(p.LeaseUntil), ms(p.ExpiresAt),
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
	s.setRun(p.Key, p.RunID, true)
	res := ledger.ClaimResult{Claimed: true, Attempt: attempt}
	if flat, _ := reply[3].([]any); len(flat) > 0 {
		if res.Previous, err = decode(p.Key, flat); err != nil {
			return ledger.ClaimResult{}, err
		}
	}
	return res, nil
}

// write runs one of the owner-conditional scripts, with the index of the
// run this Store claimed the record for; when the record is of another
// run (this Store did not claim it), the script writes nothing and names
// the run, and write runs it again with that run's index. settled says
// whether the script settles the record (this Store then forgets its run).
func (s *Store) write(ctx context.Context, script *redis.Script, settled bool, key, owner string, args ...any) error {
	if key == "" || owner == "" {
		return fmt.Errorf("ledgerredis: %w: key and owner are required", ledger.ErrInvalid)
	}
	run := s.runOf(key)
	for range 3 {
		v, err := s.run(ctx, script, s.keys(key, run), append([]any{key, ms(s.clock.Now()), owner, run}, args...)...)
		if err != nil {
			return err
		}
		switch v {
		case int64(1):
			if settled {
				s.setRun(key, "", false)
			}
			return nil
		case int64(0):
			s.setRun(key, "", false)
			return ledger.ErrNotOwner
		}
		other, ok := v.([]any)
		if !ok || len(other) != 2 || other[0] != int64(2) {
			return unexpected(v)
		}
		run = str(other[1])
		if !settled {
			s.setRun(key, run, true)
		}
	}
	return fmt.Errorf("ledgerredis: %w: the run of %s kept changing", ledger.ErrUnavailable, key)
}

// Complete implements ledger.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return s.write(ctx, completeScript, true, key, owner, c.Summary, c.Ref, c.Result, flag(c.Truncated), s.pendingGrace, c.Retention.Milliseconds(), s.settledChannel())
}

// Fail implements ledger.Store.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return s.write(ctx, failScript, true, key, owner, f.Reason, flag(f.Definite), s.pendingGrace, f.Retention.Milliseconds(), s.settledChannel())
}

// Extend implements ledger.Store. It raises the record's retention to the
// new lease end when that is later, so that a live lease never outlives
// the record.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if leaseUntil.IsZero() {
		return fmt.Errorf("ledgerredis: %w: lease is required", ledger.ErrInvalid)
	}
	return s.write(ctx, extendScript, false, key, owner, ms(leaseUntil), s.pendingGrace)
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" {
		return nil, fmt.Errorf("ledgerredis: %w: key is required", ledger.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := s.c.HGetAll(ctx, s.recordKey(key)).Result()
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
// state's records and one of each run's, by lease end; List reads the
// indexes the filter asks for (the run's when it names a run, else those
// of its state or of every state), every bucket's, pipelined, and merges
// them in cursor order, so that its cost grows with the page, not with
// the ledger. A listing of one run and one state reads the run's index
// and skips its records of other states.
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
	// The indexes read: one per bucket and state, or per bucket for a run.
	perBucket := len(states)
	index := func(source int) string { return s.stateIndex(source/perBucket, states[source%perBucket]) }
	// An entry is stale when its record no longer has this field value.
	staleField := func(source int) (string, string) { return "s", string(states[source%perBucket]) }
	if f.RunID != "" {
		perBucket = 1
		index = func(source int) string { return s.runIndex(source, f.RunID) }
		staleField = func(int) (string, string) { return "u", f.RunID }
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
		// A page of each source's index, pipelined.
		calls := make([]evalCall, len(reqs))
		for i, r := range reqs {
			afterLease := ""
			if !r.After.IsZero() {
				afterLease = strconv.FormatInt(ms(r.After.LeaseUntil), 10)
			}
			calls[i] = evalCall{keys: []string{index(r.Source)}, args: []any{leaseBefore, afterLease, r.After.Key, min(r.N, listPage)}}
		}
		scans, err := s.evalPipelined(ctx, listScanScript, calls)
		if err != nil {
			return nil, err
		}
		type entry struct {
			req int
			key string
		}
		var entries []entry
		replies := make([]listmerge.Reply, len(reqs))
		for i, v := range scans {
			flat, ok := v.([]any)
			if !ok || len(flat) < 3 || len(flat)%2 != 1 {
				return nil, unexpected(v)
			}
			done, _ := flat[0].(int64)
			replies[i] = listmerge.Reply{Done: done == 1, Next: reqs[i].After}
			if lease, err := strconv.ParseInt(str(flat[1]), 10, 64); err == nil {
				replies[i].Next = ledger.Cursor{LeaseUntil: time.UnixMilli(lease).UTC(), Key: str(flat[2])}
			}
			for j := 3; j < len(flat); j += 2 {
				entries = append(entries, entry{req: i, key: str(flat[j])})
			}
		}
		if len(entries) == 0 {
			return replies, nil
		}
		// Their records, pipelined: each in the slot of its index.
		reads := make([]*redis.MapStringStringCmd, len(entries))
		if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, e := range entries {
				reads[k] = p.HGetAll(ctx, s.recordKey(e.key))
			}
			return nil
		}); err != nil {
			return nil, unavailable(err)
		}
		now := s.clock.Now()
		var stale []evalCall
		for k, e := range entries {
			field, value := staleField(reqs[e.req].Source)
			m := reads[k].Val()
			if len(m) == 0 || joined(m, field) != value {
				// Gone, or left the state (the run) since: the entry
				// goes, unless the record is back in it by then.
				stale = append(stale, evalCall{keys: []string{calls[e.req].keys[0], s.recordKey(e.key)}, args: []any{e.key, field, value}})
				continue
			}
			r, err := fromMap(e.key, m)
			if err != nil {
				return nil, err
			}
			if r.Expired(now) || (f.State != "" && r.State != f.State) {
				continue
			}
			replies[e.req].Records = append(replies[e.req].Records, *r)
		}
		if _, err := s.evalPipelined(ctx, dropStaleScript, stale); err != nil {
			return nil, err
		}
		return replies, nil
	}
	return listmerge.Merge(ctx, len(s.tags)*perBucket, f.After, limit, fetch)
}

// Purge implements ledger.Purger. The server deletes a done or failed
// record's key itself a minute after its retention ends; Purge deletes the
// records expired at before sooner, and drops from the indexes the
// entries of keys that have gone, which each write trims only a few at a
// time. It walks each bucket's index of all records up to a minute past
// before, a page per script run, and checks and deletes each record with a
// script of its own (pipelined), so that no step holds the server for
// long, however many records have expired. A record settled more than a
// minute after its retention ended is left to its key's expiry.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	upTo := max(ms(before)+60000, ms(s.clock.Now()))
	deleted := 0
	for b := range s.tags {
		score, member := "", ""
		for {
			v, err := scanScript.Run(ctx, s.c, []string{s.tag(b) + "all"}, score, member, upTo, purgePage).Slice()
			if err != nil {
				return deleted, unavailable(err)
			}
			if len(v) < 3 {
				return deleted, unexpected(v)
			}
			score, member = str(v[1]), str(v[2])
			members := make([]string, 0, len(v)-3)
			for _, m := range v[3:] {
				members = append(members, str(m))
			}
			runs, err := s.runsOf(ctx, members)
			if err != nil {
				return deleted, err
			}
			calls := make([]evalCall, 0, len(members))
			for i, m := range members {
				calls = append(calls, evalCall{keys: s.keys(m, runs[i]), args: []any{m, ms(before)}})
			}
			replies, err := s.evalPipelined(ctx, purgeOneScript, calls)
			if err != nil {
				return deleted, err
			}
			for _, r := range replies {
				if r == int64(1) {
					deleted++
				}
			}
			if done, _ := v[0].(int64); done == 1 {
				break
			}
		}
	}
	return deleted, nil
}

// evalCall is one run of a script: its keys and arguments.
type evalCall struct {
	keys []string
	args []any
}

// evalPipelined runs script once per call, pipelined (on a cluster each
// to the node of its keys' slot), and returns the replies in order. A
// call the server's script cache cannot answer (NOSCRIPT) is sent again
// with the script's text.
func (s *Store) evalPipelined(ctx context.Context, script *redis.Script, calls []evalCall) ([]any, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return nil, unavailable(err)
	}
	out := make([]any, len(calls))
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd = script.Run(ctx, s.c, calls[i].keys, calls[i].args...)
		}
		v, err := cmd.Result()
		if err != nil {
			return nil, unavailable(err)
		}
		out[i] = v
	}
	return out, nil
}

// runsIndexedMarker ends a bucket's key that marks its state and run
// indexes complete ({tag}:indexed marks the state indexes only: a bucket
// a version before the run indexes marked is walked once more).
const runsIndexedMarker = "indexed:runs"

// indexed makes sure, once per Store, that every bucket's state and run
// indexes hold the records written before those indexes existed (by a
// version of this package that kept only the pending index and the index
// of all records, or no run indexes): a bucket without its marker key is
// walked once, a page of its records per script run, and then marked for
// good: every write keeps the indexes, so a marked bucket never needs the
// walk again, also after its records and indexes expired. Walking again
// is harmless.
func (s *Store) indexed(ctx context.Context) error {
	s.reindexMu.Lock()
	defer s.reindexMu.Unlock()
	if s.reindexed {
		return nil
	}
	for b := range s.tags {
		t := s.tag(b)
		n, err := s.c.Exists(ctx, t+runsIndexedMarker).Result()
		if err != nil {
			return unavailable(err)
		}
		if n == 1 {
			continue
		}
		score, member := "", ""
		for {
			v, err := scanScript.Run(ctx, s.c, []string{t + "all"}, score, member, math.MaxInt64, listPage).Slice()
			if err != nil {
				return unavailable(err)
			}
			if len(v) < 3 {
				return unexpected(v)
			}
			score, member = str(v[1]), str(v[2])
			members := make([]string, 0, len(v)-3)
			for _, m := range v[3:] {
				members = append(members, str(m))
			}
			runs, err := s.runsOf(ctx, members)
			if err != nil {
				return err
			}
			calls := make([]evalCall, 0, len(members))
			for i, m := range members {
				calls = append(calls, evalCall{keys: s.keys(m, runs[i]), args: []any{m, runs[i]}})
			}
			if _, err := s.evalPipelined(ctx, reindexOneScript, calls); err != nil {
				return err
			}
			if done, _ := v[0].(int64); done == 1 {
				break
			}
		}
		// Both marks: the state indexes' (which versions before the run
		// indexes read) and the run indexes'.
		if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, t+"indexed", "1", 0)
			p.Set(ctx, t+runsIndexedMarker, "1", 0)
			return nil
		}); err != nil {
			return unavailable(err)
		}
	}
	s.reindexed = true
	return nil
}

// runsOf reads the run of each record of keys (pipelined); "" for a
// record without a run or gone.
func (s *Store) runsOf(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	fields := make([]string, 0, maxChunks)
	fields = append(fields, "u")
	for i := 1; i < maxChunks; i++ {
		fields = append(fields, "u"+strconv.Itoa(i))
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, s.recordKey(k), fields...)
		}
		return nil
	}); err != nil {
		return nil, unavailable(err)
	}
	runs := make([]string, len(keys))
	for i, c := range cmds {
		var b strings.Builder
		for _, v := range c.Val() {
			if v == nil {
				break
			}
			b.WriteString(str(v))
		}
		runs[i] = b.String()
	}
	return runs, nil
}

// maxChunks is the most chunks a text field is split into (luaChunks).
const maxChunks = 8

// joined returns the field f of a record's hash, its chunks (f1, f2, ...)
// joined; see luaChunks.
func joined(m map[string]string, f string) string {
	v, ok := m[f]
	if !ok {
		return ""
	}
	for i := 1; ; i++ {
		c, ok := m[f+strconv.Itoa(i)]
		if !ok {
			return v
		}
		v += c
	}
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
		Tool:        joined(m, "t"),
		RunID:       joined(m, "u"),
		State:       ledger.State(m["s"]),
		Owner:       joined(m, "o"),
		LeaseUntil:  when("l"),
		ExpiresAt:   when("e"),
		Fingerprint: joined(m, "f"),
		Attempt:     int(num("a")),
		AttemptAt:   when("at"),
		Summary:     joined(m, "m"),
		Ref:         joined(m, "r"),
		Truncated:   m["z"] == "1",
		Reason:      joined(m, "n"),
		UpdatedAt:   when("w"),
	}
	if x := joined(m, "x"); x != "" {
		r.Result = []byte(x)
	}
	if !r.State.Valid() || len(bad) > 0 {
		return nil, fmt.Errorf("ledgerredis: %w: malformed record %s (state %q, fields %s)",
			ledger.ErrUnavailable, key, m["s"], strings.Join(bad, ", "))
	}
	return r, nil
}
