package slackfake_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/slackfake"
)

// Slack posts again on every chat.postMessage; the channel's history shows
// the message, with its metadata, once the history lag has passed.
func Example() {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // the test's clock, read by the server
	s := slackfake.NewServer(&slackfake.Config{Clock: clk, HistoryLag: 5 * time.Second})
	defer s.Close()

	call := func(method string, p url.Values) map[string]any {
		p.Set("token", "xoxb-test")
		resp, err := s.Client().Post(s.URL+"/api/"+method, "application/x-www-form-urlencoded", strings.NewReader(p.Encode()))
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	history := func() int {
		out := call("conversations.history", url.Values{"channel": {"C0000000001"}, "include_all_metadata": {"true"}})
		msgs, _ := out["messages"].([]any)
		return len(msgs)
	}
	posted := call("chat.postMessage", url.Values{"channel": {"#general"}, "text": {"Deploy finished"},
		"metadata": {`{"event_type": "oncely_action", "event_payload": {"oncely_key": "act-7"}}`}})
	fmt.Println("posted:", posted["ok"], posted["channel"], posted["ts"])
	fmt.Println("in history at once:", history())
	clk.Advance(5 * time.Second)
	fmt.Println("in history 5 s later:", history())
	fmt.Println("unmodelled:", call("chat.update", url.Values{"channel": {"C0000000001"}})["error"])
	fmt.Println("effects:", len(s.Journal()), s.Journal()[0].Key)
	// Output:
	// posted: true C0000000001 1700000000.000000
	// in history at once: 0
	// in history 5 s later: 1
	// unmodelled: the fake does not model the method POST /api/chat.update (slackfake)
	// effects: 1 act-7
}
