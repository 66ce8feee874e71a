package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// The tests run against the server of pgtest: ONCELY_POSTGRES_URL, the
// one on 127.0.0.1:5432, or one it starts.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m.Run)) }

// The job inserted twice makes one refund, both jobs complete with the
// refund's id, and the program's schema is gone afterwards.
func TestRun(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := Schema()
	var out bytes.Buffer
	if err := run(ctx, &out, url, schema); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	want := "job completed, output is a refund id: true\njob completed, output is a refund id: true\nrefunds: 1\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	pool := pgtest.Pool(t)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("schema %s left behind", schema)
	}
}
