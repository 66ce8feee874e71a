//go:build oncely_demo

package main

import "github.com/spf13/cobra"

// With the build tag oncely_demo (make demo), oncely has the commands that
// need no ledger backend but the demo's SQLite file: demo, key,
// serve-fakes and version. It builds in a fraction of the time, since it
// links neither the AWS SDK, pgx, go-redis nor the MCP SDK.
func ledgerCommands() []*cobra.Command { return nil }

func quietLibraries() {}
