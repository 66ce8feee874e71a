package mailfake_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/mailfake"
)

// The email API sends again on every POST; searching by reference finds the
// earlier message, but only once the index has caught up.
func Example() {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // the test's clock, read by the server
	s := mailfake.NewServer(&mailfake.Config{Clock: clk, IndexLag: 5 * time.Second})
	defer s.Close()

	body := `{"from":"desk@shop.test","to":"ada@example.test","subject":"Refund","reference":"act-7"}`
	search := func() int {
		resp, err := s.Client().Get(s.URL + "/v1/messages?reference=act-7")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var out struct{ Data []mailfake.Message }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return len(out.Data)
	}
	resp, err := s.Client().Post(s.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("sent:", resp.StatusCode)
	fmt.Println("found at once:", search())
	clk.Advance(5 * time.Second)
	fmt.Println("found 5 s later:", search())
	fmt.Println("effects:", len(s.Journal()))
	// Output:
	// sent: 202
	// found at once: 0
	// found 5 s later: 1
	// effects: 1
}
