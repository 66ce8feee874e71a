package fakes

import (
	"net"
	"net/http"
	"net/http/httptest"
)

// Listener is what every fake's Server adds to its Handler: the handler
// served on a loopback address, like httptest.Server.
type Listener struct {
	// URL is the base URL of the server ("http://127.0.0.1:port"), the API
	// base to give a client.
	URL string

	srv *httptest.Server
}

// Listen serves h on a new listener on 127.0.0.1 (never another
// interface), like httptest.NewServer. Close it when done.
func Listen(h http.Handler) Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("fakes: cannot listen on 127.0.0.1: " + err.Error())
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	return Listener{URL: srv.URL, srv: srv}
}

// Close shuts the server down, closing client connections.
func (l Listener) Close() { l.srv.Close() }

// Client returns an HTTP client for the server.
func (l Listener) Client() *http.Client { return l.srv.Client() }
