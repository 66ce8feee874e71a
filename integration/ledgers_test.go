package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgercache"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// backend is a ledger the tests run on.
type backend struct {
	name string
	// open returns a fresh, empty store on clock, removed when t ends, and
	// the environment that lets a child process open the same store (nil
	// for a store no other process can reach).
	open func(t testing.TB, clock clock.Clock) (ledger.Store, []string)
}

var backends = []backend{
	{name: "memory", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		return ledgermem.New(&ledgermem.Config{Clock: clock}), nil
	}},
	{name: "sqlite", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		env := []string{"ONCELY_LEDGER=sqlite", "ONCELY_SQLITE=" + filepath.Join(t.TempDir(), "ledger.db")}
		return mustOpen(t, env, clock), env
	}},
	// The done-record cache in front of SQLite: repeats this process saw
	// done are answered from memory; a child process opens the file alone.
	{name: "sqlite+cache", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		env := []string{"ONCELY_LEDGER=sqlite", "ONCELY_SQLITE=" + filepath.Join(t.TempDir(), "ledger.db")}
		return ledgercache.New(mustOpen(t, env, clock), &ledgercache.Config{Clock: clock}), env
	}},
	{name: "dynamo", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		endpoint := dynalitetest.Endpoint(t)
		env := []string{"ONCELY_LEDGER=dynamo", "ONCELY_DYNAMO_ENDPOINT=" + endpoint,
			"ONCELY_DYNAMO_TABLE=" + dynalitetest.NewTable(t, dynalitetest.NewClient(endpoint))}
		return mustOpen(t, env, clock), env
	}},
	{name: "redis", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		url := redistest.URL(t)
		env := []string{"ONCELY_LEDGER=redis", "ONCELY_REDIS=" + url + "?prefix=" + redistest.Prefix(t, url)}
		return mustOpen(t, env, clock), env
	}},
	{name: "postgres", open: func(t testing.TB, clock clock.Clock) (ledger.Store, []string) {
		schema := pgtest.Schema(t, pgtest.Pool(t))
		env := []string{"ONCELY_LEDGER=postgres", "ONCELY_POSTGRES_URL=" + pgtest.URL(t), "ONCELY_POSTGRES_SCHEMA=" + schema}
		return postgresStore(t, schema, clock), env
	}},
}

// postgresStore returns a store on the test binary's pool (pgtest.Pool),
// in schema, migrating its table unless that is done.
func postgresStore(t testing.TB, schema string, clock clock.Clock) ledger.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	cfg := &ledgerpg.Config{Clock: clock, Schema: schema}
	if err := ledgerpg.Migrate(context.Background(), pool, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := ledgerpg.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // its listening connection, if it watched
	return s
}

func mustOpen(t testing.TB, env []string, clock clock.Clock) ledger.Store {
	t.Helper()
	s, closeStore, err := openFromEnv(context.Background(), lookupIn(env), clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return s
}

// openFromEnv opens the durable store the environment names: how a child
// process finds its parent's ledger.
func openFromEnv(ctx context.Context, getenv func(string) string, clock clock.Clock) (ledger.Store, func(), error) {
	switch b := getenv("ONCELY_LEDGER"); b {
	case "sqlite":
		s, err := ledgersqlite.Open(ctx, getenv("ONCELY_SQLITE"), &ledgersqlite.Config{Clock: clock})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	case "dynamo":
		client := dynalitetest.NewClient(getenv("ONCELY_DYNAMO_ENDPOINT"))
		return ledgerdynamo.New(client, getenv("ONCELY_DYNAMO_TABLE"), &ledgerdynamo.Config{Clock: clock}), func() {}, nil
	case "redis":
		s, err := ledgerredis.OpenURL(ctx, getenv("ONCELY_REDIS"), &ledgerredis.Config{Clock: clock})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	case "postgres":
		s, err := ledgerpg.OpenURL(ctx, getenv("ONCELY_POSTGRES_URL"), &ledgerpg.Config{Clock: clock, Schema: getenv("ONCELY_POSTGRES_SCHEMA")})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	default:
		return nil, nil, fmt.Errorf("integration: no durable ledger %q", b)
	}
}

// lookupIn reads NAME=value pairs like os.Getenv.
func lookupIn(env []string) func(string) string {
	return func(name string) string {
		for _, kv := range env {
			if len(kv) > len(name) && kv[:len(name)] == name && kv[len(name)] == '=' {
				return kv[len(name)+1:]
			}
		}
		return ""
	}
}
