package github_test

import (
	"context"
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/github"
	"github.com/oncely/oncely/reconcile"
)

// An issue tool on GitHub, which has no idempotency. The connection drops
// after GitHub opened the issue: the executor looks the issue up by its
// marker (in the list of recent issues, before the search index shows it)
// and finds it instead of opening another. The model calls again,
// rephrased: already done.
func Example() {
	srv := githubfake.NewServer(nil)
	defer srv.Close()
	api := srv.URL + "/"
	ghc, err := gh.NewClient(gh.WithURLs(&api, &api), gh.WithAuthToken("ghp_example"))
	if err != nil {
		panic(err)
	}
	issues := github.New(ghc, "acme", "widgets", nil).Issues

	report := client.Tool{
		Name:     "report_bug",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				TicketID string `json:"ticketId"`
				Text     string `json:"text"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			is, err := issues.Create(ctx, inv.DownstreamKey, gh.CreateIssueRequest{
				Title: "Bug from ticket " + in.TicketID, Body: gh.Ptr(in.Text),
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: is.Summary(), Ref: is.Ref()}, nil
		},
		Reconciler: reconcile.New(issues, nil),
	}
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(report); err != nil {
		panic(err)
	}
	srv.Faults.Add(fault.Rule{Route: "POST /repos/{owner}/{repo}/issues", Attempt: 1, Action: fault.CommitThenDrop})
	for _, input := range []string{
		`{"ticketId": 42, "text": "Export fails on empty carts."}`,
		`{"ticketId": "42", "text": "Exporting an empty cart fails."}`,
	} {
		res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: "report_bug", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("issues opened:", len(srv.Journal()))
	// Output:
	// Done: issue acme/widgets#1 opened: Bug from ticket 42
	// Already done earlier in this run: issue acme/widgets#1 opened: Bug from ticket 42. Do not repeat it.
	// issues opened: 1
}
