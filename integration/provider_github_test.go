package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/github"
)

// GitHub: issues and issue comments, which GitHub does not deduplicate,
// found again by the marker in their body through a lagging search and a
// list of recent objects. Its scenarios join the failure cases and the
// chaos run through the registries of kit_test.go.
func init() {
	extraProviders["github"] = extraProvider{
		start: func(opt kitOptions) (http.Handler, server) {
			f := githubfake.NewHandler(&githubfake.Config{Seed: opt.seed, Clock: opt.clock, IndexLag: indexLag})
			return f, server{faults: f.Faults, journal: f.Journal}
		},
		build: func(k *kit, opt kitOptions, url string, cfg providers.Config) {
			base := url + "/"
			hc := cfg.HTTPClient
			if hc == nil {
				hc = &http.Client{}
			}
			// go-github's own check before sending reads the wall clock;
			// the adapter handles GitHub's rate limits on the kit's clock.
			ghc, err := gh.NewClient(gh.WithURLs(&base, &base), gh.WithAuthToken("ghp_integration"),
				gh.WithHTTPClient(hc), gh.WithDisableRateLimitCheck())
			if err != nil {
				panic(err)
			}
			gcfg := &github.Config{
				Timeout: cfg.Timeout, MaxRetries: cfg.MaxRetries, RetryWaitMin: cfg.RetryWaitMin,
				RetryWaitMax: cfg.RetryWaitMax, MaxRetryAfter: cfg.MaxRetryAfter, SearchLag: indexLagBound,
			}
			if opt.clock != nil {
				gcfg.Clock = opt.clock
			}
			k.extra["github"] = github.New(ghc, "acme", "support", gcfg)
		},
	}
	providerNames = append(providerNames, "github")
	scenarios = append(scenarios, githubScenarios...)
}

func (k *kit) github() *github.Client { return k.extra["github"].(*github.Client) }

var githubScenarios = []scenario{
	{
		name: "github_issue", provider: "github", kind: githubfake.KindIssue, route: "POST /repos/{owner}/{repo}/issues",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:     "open_issue",
				Identity: []client.Field{{Path: "ticketId", Norm: client.Integer}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						TicketID int64  `json:"ticketId"`
						Text     string `json:"text"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's text is sent: GitHub has no idempotency to
					// compare it, and the issue is opened only once.
					is, err := k.github().Issues.Create(ctx, inv.DownstreamKey, gh.CreateIssueRequest{
						Title: fmt.Sprintf("Ticket %d", in.TicketID), Body: &in.Text, Labels: []string{"support"},
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: is.Summary(), Ref: is.Ref()}, nil
				},
				Reconciler: policy(k.github().Issues),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"ticketId": %d, "text": %q}`, n, text)
		},
	},
	{
		name: "github_comment", provider: "github", kind: githubfake.KindIssueComment,
		route: "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:     "comment_issue",
				Identity: []client.Field{{Path: "issue", Norm: client.Integer}, {Path: "ticketId", Norm: client.Integer}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						Issue    int    `json:"issue"`
						TicketID int64  `json:"ticketId"`
						Text     string `json:"text"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					c, err := k.github().Comments.Create(ctx, inv.DownstreamKey, in.Issue, in.Text)
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: c.Summary(), Ref: c.Ref()}, nil
				},
				Reconciler: policy(k.github().Comments),
			}
		},
		input: func(n int, issue, text string) json.RawMessage {
			return jsonf(`{"issue": %s, "ticketId": %d, "text": %q}`, issue, n, text)
		},
		setup: func(ctx context.Context, k *kit, key string, n int) (string, error) {
			is, err := k.github().Issues.Create(ctx, key, gh.CreateIssueRequest{Title: fmt.Sprintf("Thread %d", n)})
			if err != nil {
				return "", err
			}
			return strconv.Itoa(is.GetNumber()), nil
		},
	},
}
