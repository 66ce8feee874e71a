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
	"strings"
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
else the embedded SQLite file ./oncely.db (created if missing).

Over HTTP, browser requests from another origin are refused (as the MCP
transport specification requires, against DNS rebinding) unless
--allow-origin (or http.allowedOrigins) names it. Clients authenticate with
the bearer token in the environment variable ONCELY_MCP_TOKEN or in the
file --token-file (or http.auth.tokenFile), and/or with OAuth 2.1 access
tokens of the configuration's http.auth.oauth issuer. Off loopback, oncely
mcp refuses to start without one of them, unless --trusted-network says
that every peer that can reach the port may run the tools.`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	config := cmd.Flags().String("config", "", "gateway configuration file (JSON or YAML)")
	addr := cmd.Flags().String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8787) instead of stdio")
	runID := cmd.Flags().String("run-id", "", "the run id of calls that carry none (default $"+mcpgateway.RunIDEnv+", else the configuration's run.id)")
	origins := cmd.Flags().StringArray("allow-origin", nil, "an origin (scheme://host[:port]) whose cross-origin browser requests --http serves; repeatable")
	tokenFile := cmd.Flags().String("token-file", "", "a file holding the bearer token --http clients must send (else $"+mcpgateway.TokenEnv+")")
	trusted := cmd.Flags().Bool("trusted-network", false, "serve --http off loopback without authentication: every peer that reaches the port may run the tools")
	lease := cmd.Flags().Duration("lease", 0, "how long a claim stands after its last heartbeat while the upstream runs the call (default: the configuration's lease, else 12s)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *config == "" {
			return usageErr("oncely mcp --config gateway.json (see the MCP gateway guide, docs/mcp-gateway.md)", "no --config")
		}
		cfg, err := mcpgateway.LoadConfig(*config)
		if err != nil {
			return usageErr("check the configuration file against the MCP gateway guide, docs/mcp-gateway.md", "%v", err)
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
		cfg.HTTP.AllowedOrigins = append(cfg.HTTP.AllowedOrigins, *origins...)
		if err := cfg.Validate(); err != nil {
			return usageErr("--allow-origin https://app.example.com", "%v", err)
		}
		token, err := bearerToken(*tokenFile, cfg.HTTP.Auth.TokenFile)
		if err != nil {
			return usageErr("put the token in a file readable by oncely (--token-file) or in $"+mcpgateway.TokenEnv, "%v", err)
		}
		if *addr != "" && !*trusted && token == "" && cfg.HTTP.Auth.OAuth == nil {
			if off, err := offLoopback(*addr); err != nil {
				return usageErr("--http 127.0.0.1:8787", "%v", err)
			} else if off {
				return usageErr("set $"+mcpgateway.TokenEnv+" or --token-file (or http.auth.oauth in the configuration), or --trusted-network if every peer that can reach the port may run the tools",
					"--http %s listens off loopback without authentication: anyone who reaches it could run the tools", *addr)
			}
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
		gw, err := mcpgateway.New(ctx, l, cfg, &mcpgateway.Options{Logger: logger, Token: token})
		switch {
		case errors.Is(err, mcpgateway.ErrConfig):
			return usageErr("check the configuration against the MCP gateway guide, docs/mcp-gateway.md", "%v", err)
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
		if off, _ := offLoopback(*addr); off && !gw.Authenticated() {
			logger.Warn("oncely mcp: WARNING: serving off loopback without authentication (--trusted-network): every peer that reaches " + *addr + " may run the tools")
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

// bearerToken reads the HTTP transport's bearer token: from the file flag
// (else the configuration's file), else from the environment. A token is
// never a flag's value, which ps and --help would show.
func bearerToken(flagFile, cfgFile string) (string, error) {
	file := flagFile
	if file == "" {
		file = cfgFile
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the token file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("the token file %s is empty", file)
		}
		return t, nil
	}
	return strings.TrimSpace(os.Getenv(mcpgateway.TokenEnv)), nil
}

// offLoopback reports whether addr (host:port) listens on more than this
// machine's loopback: an empty host, an unspecified address, or any other
// address or name that does not resolve to loopback only.
func offLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--http %s: %v", addr, err)
	}
	if host == "localhost" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return !ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return true, nil
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return true, nil
		}
	}
	return false, nil
}
