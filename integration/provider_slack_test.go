package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/slack"
	"github.com/oncely/oncely/reconcile"
)

// Slack: a post carrying the key in its metadata, found again in the
// channel's history, which lags by indexLag (the adapter is told
// indexLagBound).
func init() {
	const token, channel = "xoxb-integration", "C0000000001"
	extraProviders["slack"] = extraProvider{
		start: func(opt kitOptions) (http.Handler, server) {
			f := slackfake.NewHandler(&slackfake.Config{Seed: opt.seed, Clock: opt.clock, Token: token, HistoryLag: indexLag})
			return f, server{faults: f.Faults, journal: f.Journal}
		},
		build: func(k *kit, opt kitOptions, url string, cfg providers.Config) {
			if opt.clock != nil {
				cfg.Clock = opt.clock
			}
			c, err := slack.New(&slack.Config{APIURL: url + "/api/", Token: token, Channel: channel, HTTP: cfg,
				HistoryLag: indexLagBound, Lookback: time.Hour, Skew: time.Minute})
			if err != nil {
				panic(err) // the configuration above is valid
			}
			k.extra["slack"] = c
			// The reconciler reads the history from shortly before the
			// attempt; blind and clockless kits as build makes them.
			switch {
			case opt.blind:
				k.extra["slack/reconciler"] = client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
					return client.Reconciliation{Verdict: client.VerdictResendSafe}, nil
				})
			case opt.clock != nil:
				k.extra["slack/reconciler"] = reconcile.New(c, &reconcile.Config{Clock: opt.clock, Sleep: sleeper(opt.clock),
					InitialInterval: time.Second, MaxInterval: 5 * time.Second})
			}
		},
	}
	providerNames = append(providerNames, "slack")
	scenarios = append(scenarios, scenario{
		name: "slack_post", provider: "slack", kind: slackfake.KindMessage, route: "POST /api/chat.postMessage",
		tool: func(k *kit, _ func(providers.Adapter) client.Reconciler) client.Tool {
			ch := k.extra["slack"].(*slack.Client)
			rec, _ := k.extra["slack/reconciler"].(client.Reconciler)
			return client.Tool{
				Name:     "announce_release",
				Identity: []client.Field{{Path: "release", Norm: client.Integer}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						Release int64  `json:"release"`
						Text    string `json:"text"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's text is posted: Slack has nothing to compare
					// it with, and the message is posted only once.
					msg, err := ch.Post(ctx, inv.DownstreamKey, fmt.Sprintf("Release %d: %s", in.Release, in.Text))
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: "message " + msg.Ref(), Ref: msg.Ref()}, nil
				},
				Reconciler: rec,
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"release": %d, "text": %q}`, n, text)
		},
	})
}
