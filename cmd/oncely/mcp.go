//go:build !oncely_demo

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/ledger/ledgerurl"
	"github.com/oncely/oncely/mcpgateway"
)

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp --config gateway.json",
		Short: "Serve an MCP gateway that makes another MCP server's side-effecting tools exactly-once",
		Long: `oncely mcp sits in front of another MCP server (spawned over stdio, or
reached over streamable HTTP, as the configuration says) and makes the tools
the configuration names exactly-once; every other tool, resource and prompt
passes through. It serves one client over stdio, or streamable HTTP with
--http ADDR, until SIGINT or SIGTERM.

The run id scopes the action keys: the same call in the same run is done
once. It is --run-id, else the environment variable ONCELY_RUN_ID, else the
configuration's run.id; a call's _meta entry "oncely/run" (and, over HTTP,
the Oncely-Run header) overrides it. Without any, every gateway process
(every HTTP session) is its own run, and a restart or a reconnect does the
same call again: have the host set ONCELY_RUN_ID per conversation.

The ledger is --ledger (a ledger URL), else the configuration's "ledger",
else the embedded SQLite file ./oncely.db (created if missing).`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	config := cmd.Flags().String("config", "", "gateway configuration file (JSON or YAML)")
	addr := cmd.Flags().String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8787) instead of stdio")
	runID := cmd.Flags().String("run-id", "", "the run id of calls that carry none (default $"+mcpgateway.RunIDEnv+", else the configuration's run.id)")
	lease := cmd.Flags().Duration("lease", 0, "how long a claim stands after its last heartbeat while the upstream runs the call (default: the configuration's lease, else 12s)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *config == "" {
			return usageErr("oncely mcp --config gateway.json (see the README's MCP gateway section)", "no --config")
		}
		cfg, err := mcpgateway.LoadConfig(*config)
		if err != nil {
			return usageErr("check the configuration file against the README's MCP gateway section", "%v", err)
		}
		if *runID == "" {
			*runID = os.Getenv(mcpgateway.RunIDEnv)
		}
		if *runID != "" {
			cfg.Run.ID = *runID
		}
		if *lease < 0 {
			return usageErr("--lease 5m", "--lease is negative")
		}
		if *lease > 0 {
			cfg.Lease = mcpgateway.Duration(*lease)
		}
		raw := *url
		if !cmd.Flags().Changed("ledger") && cfg.Ledger != "" {
			raw = cfg.Ledger
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		l, err := openLedger(ctx, raw, true)
		if err != nil {
			return err
		}
		defer l.Close()
		// stdout belongs to the MCP protocol over stdio: logs go to stderr.
		logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
		gw, err := mcpgateway.New(ctx, l, cfg, &mcpgateway.Options{Logger: logger})
		switch {
		case errors.Is(err, mcpgateway.ErrConfig):
			return usageErr("check the configuration against the README's MCP gateway section", "%v", err)
		case err != nil:
			return opErr(err, "check that the upstream MCP server starts (or answers) as configured")
		}
		defer gw.Close()
		if *addr == "" {
			// A client that closes its end of stdout must not kill the
			// gateway while calls are being recorded.
			signal.Ignore(syscall.SIGPIPE)
			if err := gw.Serve(ctx, gw.Stdio()); err != nil && ctx.Err() == nil {
				return opErr(err, "reading from the MCP client on standard input failed")
			}
			return nil
		}
		return serveHTTP(ctx, cmd, *addr, gw.Handler(nil), l)
	}
	return cmd
}

// serveHTTP serves h on addr until ctx ends.
func serveHTTP(ctx context.Context, cmd *cobra.Command, addr string, h http.Handler, l *ledgerurl.Ledger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErr("choose a free address, e.g. --http 127.0.0.1:8787", "listen on %s: %v", addr, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "oncely mcp: serving streamable HTTP on http://%s (ledger %s)\n", ln.Addr(), l.URL)
	srv := &http.Server{Handler: h}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return opErr(err, "the server stopped")
	}
	return nil
}
