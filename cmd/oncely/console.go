//go:build !oncely_demo

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/console"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerurl"
	"github.com/oncely/oncely/providers"
)

// EnvConsoleToken names the environment variable of the console's token.
const EnvConsoleToken = "ONCELY_CONSOLE_TOKEN"

func newConsoleCmd() *cobra.Command {
	var (
		p          providerFlags
		toolMap    []string
		listen     string
		token      string
		userHeader string
		proxies    []string
		user       string
		readOnly   bool
		inFlight   time.Duration
		refresh    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the operator console: what needs attention, one action, search, overview, in a browser",
		Long: `Serve the operator console of a ledger over HTTP: the actions that need
attention (uncertain, and pending whose lease ran out), every field of one
action with reconcile now, mark done and mark failed, a search, and an
overview of outcomes over time. The first line printed is its URL.

It listens on 127.0.0.1 by default. Any other address needs --token (or
ONCELY_CONSOLE_TOKEN; open the console once with ?token=...) or
--user-header, the header in which an authenticating reverse proxy in front
of it names the user, with --trusted-proxy, the proxy's addresses: the
header is believed only on requests from them (by default from loopback
addresses only), and any other request is refused. --read-only serves no
action at all.

Mark failed is refused while a request of the action's attempt may still
commit (its lease end plus --in-flight), as 'oncely ledger resolve' refuses
it. Resolutions record who made them: the proxy's user, or --user.

With --tool NAME=ADAPTER (and the adapter's flags, as for oncely reconcile)
an action of that tool can be reconciled now from its page. Adapters: ` + strings.Join(adapterNames, ", ") + `.`,
		Example: `  oncely console --ledger sqlite://oncely.db
  oncely console --ledger postgres://oncely@db/oncely --listen 0.0.0.0:8470 --user-header X-Forwarded-User --trusted-proxy 10.0.0.5
  ONCELY_CONSOLE_TOKEN=... oncely console --ledger redis://cache:6379/0 --listen :8470 --read-only`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8470", "address to listen on (host:port; port 0 picks a free one)")
	envString(f, &token, "token", EnvConsoleToken, "", "token every request must carry; required beyond loopback unless --user-header")
	f.StringVar(&userHeader, "user-header", "", "header in which a reverse proxy names the authenticated user (e.g. X-Forwarded-User)")
	f.StringArrayVar(&proxies, "trusted-proxy", nil, "address (IP or CIDR) of a proxy whose --user-header is believed (repeatable; default: loopback only)")
	f.StringVar(&user, "user", currentUser(), "who resolutions are recorded as made by, without --user-header")
	f.BoolVar(&readOnly, "read-only", false, "serve no action: show records only")
	f.DurationVar(&inFlight, "in-flight", ledger.DefaultInFlight, "how long a provider may still commit a request after it was sent")
	f.DurationVar(&refresh, "refresh", 5*time.Second, "how often the attention list and the overview refresh in the browser")
	f.StringArrayVar(&toolMap, "tool", nil, "tool name and its adapter, NAME=ADAPTER (repeatable), for reconcile now")
	p.define(f)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if inFlight <= 0 || refresh <= 0 {
			return usageErr("--in-flight and --refresh are durations like 30s", "--in-flight and --refresh must be positive")
		}
		adapters := map[string]providers.Adapter{}
		for _, m := range toolMap {
			name, adapter, ok := strings.Cut(m, "=")
			if !ok || name == "" {
				return usageErr("--tool is NAME=ADAPTER", "--tool %q", m)
			}
			a, err := p.adapter(adapter)
			if err != nil {
				return err
			}
			adapters[name] = a
		}
		cfg := console.Config{Adapters: adapters, InFlight: inFlight, ReadOnly: readOnly, Token: token, UserHeader: userHeader, User: user, Refresh: refresh}
		for _, p := range proxies {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				a, aerr := netip.ParseAddr(p)
				if aerr != nil {
					return usageErr("--trusted-proxy is an IP address or a CIDR prefix, like 10.0.0.5 or 10.0.0.0/24", "--trusted-proxy %q", p)
				}
				pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
			cfg.TrustedProxies = append(cfg.TrustedProxies, pfx.Masked())
		}
		if len(proxies) > 0 && userHeader == "" {
			return usageErr("--trusted-proxy goes with --user-header", "--trusted-proxy without --user-header")
		}
		if err := console.CheckListen(listen, &cfg); err != nil {
			return usageErr("listen on 127.0.0.1, or set --token (or "+EnvConsoleToken+") or --user-header with --trusted-proxy", "%v", err)
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			cfg.Store = l
			c, err := console.New(cfg)
			if err != nil {
				return usageErr("see 'oncely console --help'", "%v", err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usageErr("choose another --listen address", "listen: %v", err)
			}
			srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			mode := ""
			if readOnly {
				mode = " (read-only)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "http://%s/\n", ln.Addr())
			fmt.Fprintf(cmd.ErrOrStderr(), "oncely: console of %s%s on http://%s/; SIGINT or SIGTERM stops it\n", l.URL, mode, ln.Addr())
			select {
			case err := <-served:
				return opErr(err, "")
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return opErr(err, "")
			}
			return nil
		})
	}
	return cmd
}
