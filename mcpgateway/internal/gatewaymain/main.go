// Command gatewaymain runs the MCP gateway as its own process, for the
// tests that restart it, kill its upstream, or drive it from a TypeScript
// client:
//
//	gatewaymain -config gateway.json -ledger ledger.db [-http 127.0.0.1:0]
//
// Without -http it serves one client over stdio. With -http it serves
// streamable HTTP and prints "listening on http://ADDR" on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemkit/idemkit/ledger/ledgersqlite"
	"github.com/idemkit/idemkit/mcpgateway"
)

func main() {
	cfgPath := flag.String("config", "", "gateway configuration (JSON)")
	ledgerPath := flag.String("ledger", "", "SQLite ledger file")
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	runID := flag.String("run-id", "", "fixed run id (overrides the configuration's)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := mcpgateway.LoadConfig(*cfgPath)
	if err != nil {
		log.Fatal(err)
	}
	if *runID != "" {
		cfg.Run.ID = *runID
	}
	store, err := ledgersqlite.Open(ctx, *ledgerPath, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	gw, err := mcpgateway.New(ctx, store, cfg, &mcpgateway.Options{Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	if *addr == "" {
		if err := gw.Serve(ctx, gw.Stdio()); err != nil && ctx.Err() == nil {
			log.Print(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Fprintf(os.Stderr, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: gw.Handler(nil)}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		log.Print(err)
	}
}
