//go:build !oncely_demo

package main

import (
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/spf13/cobra"
)

// ledgerCommands are the commands that operate ledgers and gateways: they
// link every backend (AWS SDK, pgx, go-redis) and the MCP SDK, which the
// demo does not need (see commands_demo.go).
func ledgerCommands() []*cobra.Command {
	return []*cobra.Command{newLedgerCmd(), newReconcileCmd(), newMCPCmd(), newConsoleCmd()}
}

// quietLibraries silences the libraries' own loggers, which would print
// before the one-line error that reports what they saw: go-redis logs
// every failed dial. (The AWS SDK is silenced where its configuration is
// loaded, in ledgerurl.)
func quietLibraries() {
	redis.SetLogger(&logging.VoidLogger{})
}
