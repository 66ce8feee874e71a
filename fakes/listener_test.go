package fakes_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes"
)

func TestListenOnLoopback(t *testing.T) {
	t.Parallel()
	srv := fakes.Listen(http.NotFoundHandler())
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("URL = %s", srv.URL)
	}
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
