package githubfake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/githubfake"
)

// GitHub opens a second issue on every POST; the search finds the first
// one by its marker, but only once the index has caught up, while the list
// shows it at once.
func Example() {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // the test's clock, read by the server
	s := githubfake.NewServer(&githubfake.Config{Clock: clk, IndexLag: 30 * time.Second})
	defer s.Close()

	count := func(path string) int {
		resp, err := s.Client().Get(s.URL + path)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		if strings.HasPrefix(path, "/search/") {
			var out struct {
				TotalCount int `json:"total_count"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			return out.TotalCount
		}
		var out []json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return len(out)
	}
	body := `{"title": "Export fails", "body": "On empty carts.\n\n<!-- oncely-key: act-7 -->"}`
	resp, err := s.Client().Post(s.URL+"/repos/acme/widgets/issues", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("opened:", resp.StatusCode == http.StatusCreated)
	search := "/search/issues?q=%22act-7%22+repo:acme/widgets+in:body"
	fmt.Println("listed at once:", count("/repos/acme/widgets/issues"))
	fmt.Println("found at once:", count(search))
	clk.Advance(30 * time.Second)
	fmt.Println("found 30 s later:", count(search))
	fmt.Println("journal key:", s.Journal()[0].Key)
	// Output:
	// opened: true
	// listed at once: 1
	// found at once: 0
	// found 30 s later: 1
	// journal key: act-7
}
