package stripemocktest_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/oncely/oncely/fakes/stripefake/stripemocktest"
)

func TestMain(m *testing.M) { os.Exit(stripemocktest.Main(m)) }

// The server Main started validates requests against Stripe's
// specification: a known route answers, an unknown parameter is refused.
func TestServerValidates(t *testing.T) {
	t.Parallel()
	base := stripemocktest.URL(t)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/v1/charges?limit=3", http.StatusOK},
		{"/v1/charges?no_such_param=1", http.StatusBadRequest},
		{"/v1/no_such_route", http.StatusNotFound},
	} {
		req, err := http.NewRequest(http.MethodGet, base+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+stripemocktest.TestKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: status %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
}
