package github_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	gh "github.com/google/go-github/v93/github"
)

// newRaw serves h and returns a go-github client for it.
func newRaw(t *testing.T, h http.Handler) *gh.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	c, err := gh.NewClient(gh.WithURLs(&base, &base), gh.WithDisableRateLimitCheck())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
