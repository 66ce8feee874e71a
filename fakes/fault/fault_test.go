package fault_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
)

// request returns a request as a fake's mux would hand it over.
func request(pattern string) *http.Request {
	method, path, _ := strings.Cut(pattern, " ")
	r := httptest.NewRequest(method, path, nil)
	r.Pattern = pattern
	return r
}

// decide runs the patterns through in and returns the action applied to
// each (0 for none).
func decide(in *fault.Injector, patterns ...string) []fault.Action {
	out := make([]fault.Action, len(patterns))
	for i, p := range patterns {
		if d := in.Decide(request(p)); d.Active {
			out[i] = d.Rule.Action
		}
	}
	return out
}

func TestRuleAttemptCountsPerRoute(t *testing.T) {
	t.Parallel()
	in := fault.NewInjector(1)
	in.Add(fault.Rule{Route: "POST /a", Attempt: 2, Action: fault.FailBeforeCommit})
	got := decide(in, "POST /a", "GET /b", "POST /a", "POST /a")
	want := []fault.Action{0, 0, fault.FailBeforeCommit, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	log := in.Log()
	if len(log) != 1 || log[0].Request != 3 || log[0].Attempt != 2 || log[0].Target != "POST /a" || log[0].Rule.Status != 500 {
		t.Fatalf("log = %+v", log)
	}
	if s := log[0].String(); !strings.Contains(s, "FailBeforeCommit") || !strings.Contains(s, "attempt 2") {
		t.Fatalf("log line %q lacks the rule", s)
	}
}

func TestRulesFirstWinsAndAllCount(t *testing.T) {
	t.Parallel()
	in := fault.NewInjector(1)
	in.Add(fault.Rule{Attempt: 1, Action: fault.DropBeforeCommit})                    // any route
	in.Add(fault.Rule{Route: " POST  /a ", Attempt: 2, Action: fault.CommitThenDrop}) // spacing is normalized
	in.Add(fault.Rule{Route: "POST /a", Action: fault.Delay, Delay: time.Millisecond})
	got := decide(in, "POST /a", "POST /a", "POST /a")
	want := []fault.Action{fault.DropBeforeCommit, fault.CommitThenDrop, fault.Delay}
	if !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
}

func TestClearRemovesRulesKeepsLog(t *testing.T) {
	t.Parallel()
	in := fault.NewInjector(1)
	in.Add(fault.Rule{Action: fault.CommitThenError})
	in.SetRandom(1)
	decide(in, "GET /x")
	in.Clear()
	if got := decide(in, "GET /x", "GET /x"); !slices.Equal(got, []fault.Action{0, 0}) {
		t.Fatalf("after Clear: %v", got)
	}
	if n := len(in.Log()); n != 1 {
		t.Fatalf("log has %d entries, want 1", n)
	}
}

func TestNilInjectorInjectsNothing(t *testing.T) {
	t.Parallel()
	var in *fault.Injector
	if d := in.Decide(request("GET /x")); d.Active {
		t.Fatalf("nil injector decided %+v", d)
	}
}

func TestAddRejectsInvalidRules(t *testing.T) {
	t.Parallel()
	for _, r := range []fault.Rule{
		{},
		{Action: fault.Action(99)},
		{Action: fault.FailBeforeCommit, Status: 200},
		{Action: fault.CommitThenDrop, Attempt: -1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%+v) did not panic", r)
				}
			}()
			fault.NewInjector(1).Add(r)
		}()
	}
}

func TestRandomIsDeterministicPerSeed(t *testing.T) {
	t.Parallel()
	patterns := make([]string, 200)
	for i := range patterns {
		patterns[i] = []string{"POST /a", "GET /b"}[i%2]
	}
	run := func(seed int64) ([]fault.Action, []fault.Applied) {
		in := fault.NewInjector(seed)
		in.SetRandom(0.5)
		return decide(in, patterns...), in.Log()
	}
	a1, log1 := run(7)
	a2, log2 := run(7)
	a3, _ := run(8)
	if !slices.Equal(a1, a2) || !slices.Equal(log1, log2) {
		t.Fatal("same seed and request order gave different faults")
	}
	if slices.Equal(a1, a3) {
		t.Fatal("different seeds gave identical faults over 200 requests")
	}
	seen := map[fault.Action]int{}
	statuses := map[int]bool{}
	for _, l := range log1 {
		if !l.Random {
			t.Fatalf("entry %v not marked random", l)
		}
		seen[l.Rule.Action]++
		if l.Rule.Action == fault.FailBeforeCommit {
			statuses[l.Rule.Status] = true
		}
	}
	if len(log1) < 60 || len(log1) > 140 {
		t.Fatalf("rate 0.5 hit %d of 200 requests", len(log1))
	}
	if len(seen) != 5 {
		t.Fatalf("actions drawn: %v, want all five", seen)
	}
	if !statuses[500] || !statuses[503] || !statuses[429] {
		t.Fatalf("FailBeforeCommit statuses drawn: %v", statuses)
	}
}

func TestRandomRulesRespectRoutesAndRules(t *testing.T) {
	t.Parallel()
	in := fault.NewInjector(3)
	in.Add(fault.Rule{Route: "GET /b", Attempt: 1, Action: fault.DropBeforeCommit})
	in.SetRandomRules(1, fault.Rule{Route: "POST /a", Action: fault.CommitThenError, Status: 503, Attempt: 4})
	got := decide(in, "POST /a", "GET /b", "GET /b", "POST /a")
	want := []fault.Action{fault.CommitThenError, fault.DropBeforeCommit, 0, fault.CommitThenError}
	if !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	if log := in.Log(); len(log) != 3 {
		t.Fatalf("log = %v", log)
	} else if l := log[2]; l.Rule.Status != 503 || l.Attempt != 2 || !l.Random {
		t.Fatalf("last applied = %+v", l)
	}
	in.SetRandom(0)
	if got := decide(in, "POST /a"); got[0] != 0 {
		t.Fatalf("rate 0 still injected %v", got[0])
	}
}

// commitServer serves d.Serve around a commit counter.
func commitServer(t *testing.T, in *fault.Injector) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var commits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /commit", func(w http.ResponseWriter, r *http.Request) {
		in.Decide(r).Serve(w, r, func(status int, msg string) fault.Response {
			return fault.Response{Status: status, Header: http.Header{"X-Fault": {"1"}}, Body: []byte(msg)}
		}, func() fault.Response {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return fault.Response{Status: 400, Body: []byte(err.Error())}
			}
			commits.Add(1)
			return fault.Response{Status: 201, Body: append([]byte("committed "), body...)}
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &commits
}

// freshClient never reuses connections, so a dropped connection is seen as
// an error instead of being retried by the transport.
func freshClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

func post(c *http.Client, url string) (*http.Response, string, error) {
	resp, err := c.Post(url+"/commit", "text/plain", strings.NewReader("x"))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestActionsOverHTTP(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		rule        fault.Rule
		wantErr     bool
		wantStatus  int
		wantCommits int32
	}{
		{"FailBeforeCommit", fault.Rule{Action: fault.FailBeforeCommit, Status: 429, RetryAfter: 1500 * time.Millisecond}, false, 429, 0},
		{"DropBeforeCommit", fault.Rule{Action: fault.DropBeforeCommit}, true, 0, 0},
		{"CommitThenDrop", fault.Rule{Action: fault.CommitThenDrop}, true, 0, 1},
		{"CommitThenError", fault.Rule{Action: fault.CommitThenError, Status: 503}, false, 503, 1},
		{"ShortDelay", fault.Rule{Action: fault.Delay, Delay: 20 * time.Millisecond}, false, 201, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := fault.NewInjector(1)
			in.Add(tc.rule)
			srv, commits := commitServer(t, in)
			resp, body, err := post(freshClient(5*time.Second), srv.URL)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %d %q, want a transport error", resp.StatusCode, body)
				}
			} else {
				if err != nil {
					t.Fatalf("post: %v", err)
				}
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tc.wantStatus)
				}
				if tc.rule.Action != fault.Delay && resp.Header.Get("X-Fault") != "1" {
					t.Fatalf("answer %q is not the fake's error format", body)
				}
				if tc.rule.Action == fault.Delay && body != "committed x" {
					t.Fatalf("answer %q, want the request body replayed to commit", body)
				}
			}
			if got := commits.Load(); got != tc.wantCommits {
				t.Fatalf("commits = %d, want %d", got, tc.wantCommits)
			}
			if tc.rule.RetryAfter > 0 && resp.Header.Get("Retry-After") != "2" {
				t.Fatalf("Retry-After = %q, want 2 (1.5 s rounded up)", resp.Header.Get("Retry-After"))
			}
		})
	}
}

func TestDelayCommitsAfterClientGivesUp(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, time.Minute} {
		in := fault.NewInjector(1)
		in.Add(fault.Rule{Action: fault.Delay, Delay: delay, Attempt: 1})
		srv, commits := commitServer(t, in)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // only the delay reaches it
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/commit", strings.NewReader("x"))
		_, err := freshClient(0).Do(req)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("delay %s: err = %v, want a deadline error", delay, err)
		}
		// The handler wakes when the client's connection closes, long
		// before the delay, and commits late.
		waitFor(t, "the late commit", func() bool { return commits.Load() == 1 })
	}
}

func TestActionString(t *testing.T) {
	t.Parallel()
	if s := fault.CommitThenDrop.String(); s != "CommitThenDrop" {
		t.Fatalf("String = %q", s)
	}
	if s := fault.Action(42).String(); s != "Action(42)" {
		t.Fatalf("String = %q", s)
	}
	r := fault.Rule{Route: "POST /a", Attempt: 3, Action: fault.CommitThenError, Status: 502, SaveError: true}
	if s := r.String(); s != "CommitThenError on POST /a attempt 3 status 502 (error saved)" {
		t.Fatalf("Rule.String = %q", s)
	}
}
