package slack_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/slack"
	"github.com/oncely/oncely/reconcile"
)

// A tool that announces a deploy in a channel. Slack does not deduplicate:
// the key rides in the message's metadata, and after an ambiguous failure
// the reconciler reads the channel's history for it instead of posting
// again.
func Example() {
	srv := slackfake.NewServer(nil) // Slack in tests; omit APIURL in production
	defer srv.Close()
	channel, err := slack.New(&slack.Config{APIURL: srv.URL + "/api/", Token: "xoxb-...", Channel: "C0000000001"})
	if err != nil {
		panic(err)
	}

	announce := client.Tool{
		Name:     "announce_deploy",
		Identity: []client.Field{{Path: "service"}, {Path: "version"}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				Service string `json:"service"`
				Version string `json:"version"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			msg, err := channel.Post(ctx, inv.DownstreamKey, fmt.Sprintf("%s %s is live", in.Service, in.Version))
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: "announced: " + msg.Text, Ref: msg.Ref()}, nil
		},
		Reconciler: reconcile.New(channel, nil),
	}
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(announce); err != nil {
		panic(err)
	}
	call := client.Call{Tool: "announce_deploy", Input: json.RawMessage(`{"service": "billing", "version": "v42"}`)}
	for range 2 { // the model calls the tool twice
		res, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("messages posted:", len(srv.Journal()))
	// Output:
	// Done: announced: billing v42 is live
	// Already done earlier in this run: announced: billing v42 is live. Do not repeat it.
	// messages posted: 1
}
