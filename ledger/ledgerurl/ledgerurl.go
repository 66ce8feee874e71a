// Package ledgerurl opens a ledger.Store from a URL, so that a program
// lets its operator choose the backend with one string:
//
//	sqlite://path/oncely.db              the embedded SQLite file (a bare path works too)
//	sqlite:///var/lib/oncely/oncely.db     an absolute path
//	dynamodb://TABLE?region=eu-west-1  a DynamoDB table; credentials from the
//	                                   standard AWS chain; &endpoint=URL for a
//	                                   local or compatible server; &shards=N
//	                                   for the index's write shards (default
//	                                   64; shards=unsharded for a table made
//	                                   with the one-key index;
//	                                   ledgerdynamo.Layout.Shards); opened
//	                                   with ledgerdynamo.Open, which refuses
//	                                   eventually consistent replicas in
//	                                   other Regions unless
//	                                   &eventual_replicas=allow
//	postgres://user@host:5432/db       a PostgreSQL table (?schema=&table=),
//	                                   created or migrated on open with
//	                                   Config.Create (ledgerpg)
//	redis://host:6379/0?prefix=oncely    Redis or Valkey (?wait=N replicas;
//	                                   rediss:// for TLS) (ledgerredis)
//
// Each scheme is one entry of a table of openers, so a backend is added
// with one line. A URL that cannot name a usable ledger (unknown scheme,
// a SQLite file in a missing directory or a file that is not a database,
// a SQLite file or PostgreSQL table that does not exist without
// Config.Create, a parameter the PostgreSQL server does not know, no AWS
// region) is an *Error matching ErrConfig; a backend that cannot be
// reached answers later with ledger.ErrUnavailable, as every Store does.
//
// Importing this package compiles every backend into the program. A
// program that needs one backend imports that backend's package instead.
package ledgerurl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// Default is the ledger a program uses when none is given: a SQLite file
// in the working directory.
const Default = "sqlite://oncely.db"

// ErrConfig is matched by the errors of a URL that cannot name a usable
// ledger. Nothing was created or changed. It is ledger.ErrConfig, which
// the backends return for the same kind of mistake.
var ErrConfig = ledger.ErrConfig

// Error is a ledger URL that could not be opened: which URL (without
// credentials), and why.
type Error struct {
	URL string
	Err error
}

// Error names the URL and the cause.
func (e *Error) Error() string { return fmt.Sprintf("ledger %s: %v", e.URL, e.Err) }

// Unwrap returns the cause, which matches ErrConfig for configuration
// errors and ledger.ErrUnavailable for a backend that could not be reached.
func (e *Error) Unwrap() error { return e.Err }

// Config tunes Open. A nil *Config gives the defaults.
type Config struct {
	// Clock is the stores' clock (default: the system clock).
	Clock clock.Clock
	// Create lets Open create what does not exist yet: a SQLite file (its
	// directory must exist), a PostgreSQL schema and table, which it also
	// migrates. Without it a missing file or table (or a table that needs
	// a migration) is an ErrConfig and nothing is created: an operator's
	// typo must not leave an empty ledger behind, nor be read as one.
	// Programs that write set it; read-only tools do not.
	Create bool
}

// Ledger is an open ledger: the Store, plus what only its backend knows.
type Ledger struct {
	ledger.Store
	// URL is the URL it was opened from, without credentials.
	URL string

	init func(ctx context.Context) (string, error)
}

// Close releases the store's connections (the Store's own Close).
func (l *Ledger) Close() error {
	if c, ok := l.Store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	_ ledger.Purger     = (*Ledger)(nil)
	_ ledger.Watcher    = (*Ledger)(nil)
	_ ledger.RunIndexer = (*Ledger)(nil)
)

// Purge implements ledger.Purger by passing the purge to the Store; it
// returns an error wrapping errors.ErrUnsupported when the Store does not
// purge (DynamoDB deletes expired records through its TTL).
func (l *Ledger) Purge(ctx context.Context, before time.Time) (int, error) {
	p, ok := l.Store.(ledger.Purger)
	if !ok {
		return 0, fmt.Errorf("ledger %s does not purge: %w", l.URL, errors.ErrUnsupported)
	}
	return p.Purge(ctx, before)
}

// Watch implements ledger.Watcher by passing the watch to the Store; it
// returns an error wrapping ledger.ErrNoWatch when the Store cannot watch,
// and the caller polls.
func (l *Ledger) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w, ok := l.Store.(ledger.Watcher)
	if !ok {
		return nil, nil, fmt.Errorf("ledger %s: %w", l.URL, ledger.ErrNoWatch)
	}
	return w.Watch(ctx, key)
}

// RunsIndexed implements ledger.RunIndexer with the Store's answer.
func (l *Ledger) RunsIndexed() bool { return ledger.RunsIndexed(l.Store) }

// Init prepares the backend for use and says what it did, a line per
// step ("" when there is nothing to say): a DynamoDB table is created
// (with its index and TTL) unless it exists, and with shards=N an
// existing table gets the sharded index and its records are filed under
// it (ledgerdynamo.InitTable); a SQLite file already has its schema once
// opened, a PostgreSQL table once opened with Config.Create, and Redis
// needs none.
func (l *Ledger) Init(ctx context.Context) (string, error) {
	if l.init == nil {
		return "", nil
	}
	return l.init(ctx)
}

// opener opens the ledger a parsed URL names.
type opener func(ctx context.Context, u *url.URL, cfg Config) (*Ledger, error)

// openers maps each URL scheme to its backend.
var openers = map[string]opener{
	"sqlite":     openSQLite,
	"dynamodb":   openDynamo,
	"postgres":   openPostgres,
	"postgresql": openPostgres,
	"redis":      openRedis,
	"rediss":     openRedis,
}

// openPostgres opens postgres://user:pass@host:port/db?schema=&table=
// (ledgerpg.OpenURL, which migrates the table with cfg.Create, and
// otherwise checks that it exists).
func openPostgres(ctx context.Context, u *url.URL, cfg Config) (*Ledger, error) {
	s, err := ledgerpg.OpenURL(ctx, u.String(), &ledgerpg.Config{Clock: cfg.Clock, NoCreate: !cfg.Create})
	if te := (*ledgerpg.TableError)(nil); errors.As(err, &te) {
		what := "creates"
		if te.Version > 0 {
			what = "migrates"
		}
		return nil, fmt.Errorf("%w (oncely ledger init %s it)", err, what)
	}
	if err != nil {
		return nil, err
	}
	return &Ledger{Store: s}, nil
}

// openRedis opens redis://host:port/db?prefix=&wait= (ledgerredis.OpenURL).
func openRedis(ctx context.Context, u *url.URL, cfg Config) (*Ledger, error) {
	s, err := ledgerredis.OpenURL(ctx, u.String(), &ledgerredis.Config{Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Ledger{Store: s}, nil
}

// Schemes returns the URL schemes Open knows, sorted.
func Schemes() []string {
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the ledger raw names. A string without "://" is a SQLite
// file path.
func Open(ctx context.Context, raw string, cfg *Config) (*Ledger, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if raw == "" {
		raw = Default
	}
	if !strings.Contains(raw, "://") {
		raw = "sqlite://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &Error{URL: redactRaw(raw), Err: fmt.Errorf("%w: not a URL", ErrConfig)}
	}
	shown := u.Redacted()
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		return nil, &Error{URL: shown, Err: fmt.Errorf("%w: not a URL: %v", ErrConfig, err)}
	}
	open, ok := openers[u.Scheme]
	if !ok {
		return nil, &Error{URL: shown, Err: fmt.Errorf("%w: unknown scheme %q (known: %s)", ErrConfig, u.Scheme, strings.Join(Schemes(), ", "))}
	}
	l, err := open(ctx, u, c)
	if err != nil {
		return nil, &Error{URL: shown, Err: err}
	}
	l.URL = shown
	return l, nil
}

// redactRaw hides what may be a password in a string url.Parse refused.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

func openSQLite(ctx context.Context, u *url.URL, cfg Config) (*Ledger, error) {
	if len(u.Query()) > 0 || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("%w: a sqlite URL takes only a path", ErrConfig)
	}
	path := u.Host + u.Path
	if u.Opaque != "" {
		path = u.Opaque
	}
	if path == "" {
		return nil, fmt.Errorf("%w: no file path (sqlite://path/oncely.db)", ErrConfig)
	}
	if err := checkSQLiteFile(path, cfg.Create); err != nil {
		return nil, err
	}
	s, err := ledgersqlite.Open(ctx, path, &ledgersqlite.Config{Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Ledger{Store: s}, nil
}

// checkSQLiteFile tells the configuration errors apart before SQLite
// would create or reject the file.
func checkSQLiteFile(path string, create bool) error {
	dir := filepath.Dir(path)
	switch st, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: directory %s does not exist", ErrConfig, dir)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrConfig, err)
	case !st.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrConfig, dir)
	}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist (oncely ledger init creates it)", ErrConfig, path)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return fmt.Errorf("%w: %s is a directory, not a database file", ErrConfig, path)
	}
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return nil // an empty file becomes a new database
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: read %s: %v", ErrConfig, path, err)
	case !bytes.Equal(head[:n], sqliteHeader):
		return fmt.Errorf("%w: %s is not a SQLite database", ErrConfig, path)
	}
	return nil
}

func openDynamo(ctx context.Context, u *url.URL, cfg Config) (*Ledger, error) {
	table := u.Host
	if table == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: want dynamodb://TABLE?region=REGION[&endpoint=URL]", ErrConfig)
	}
	q := u.Query()
	for k := range q {
		if k != "region" && k != "endpoint" && k != "shards" && k != "eventual_replicas" {
			return nil, fmt.Errorf("%w: unknown parameter %q (region, endpoint, shards, eventual_replicas)", ErrConfig, k)
		}
	}
	allow := false
	switch v := q.Get("eventual_replicas"); v {
	case "", "refuse":
	case "allow":
		allow = true
	default:
		return nil, fmt.Errorf("%w: eventual_replicas=%q: want allow (every ledger write goes to one Region) or refuse", ErrConfig, v)
	}
	var layout ledgerdynamo.Layout
	switch v := q.Get("shards"); v {
	case "":
	case "unsharded":
		layout.Shards = ledgerdynamo.Unsharded
	default:
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%w: shards=%q is not a number (or unsharded)", ErrConfig, v)
		}
		layout.Shards = n
	}
	if err := layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	// The SDK's own log lines (credential fallbacks) would interleave
	// with the program's output; failures come back as errors.
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if r := q.Get("region"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: AWS configuration: %v", ErrConfig, err)
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region: add ?region= or set AWS_REGION", ErrConfig)
	}
	var ddbOpts []func(*dynamodb.Options)
	if ep := q.Get("endpoint"); ep != "" {
		e, err := url.Parse(ep)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("%w: endpoint %q is not an http(s) URL", ErrConfig, ep)
		}
		ddbOpts = append(ddbOpts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep) })
	}
	client := dynamodb.NewFromConfig(awsCfg, ddbOpts...)
	dcfg := &ledgerdynamo.Config{Clock: cfg.Clock, Layout: layout, AllowEventualReplicas: allow}
	s, err := ledgerdynamo.Open(ctx, client, table, dcfg)
	if errors.Is(err, ledgerdynamo.ErrNoTable) {
		s = ledgerdynamo.New(client, table, dcfg) // for init, which creates it
	} else if err != nil {
		return nil, err
	}
	return &Ledger{
		Store: s,
		init: func(ctx context.Context) (string, error) {
			rep, err := ledgerdynamo.InitTable(ctx, client, table, &ledgerdynamo.TableOptions{Layout: layout})
			if err != nil {
				return "", err
			}
			return rep.String(), nil
		},
	}, nil
}
