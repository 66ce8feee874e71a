package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/fakes/fault"
)

// faultSpec is one fault rule, as --fault and --faults-file give it.
type faultSpec struct {
	// Fake is the fake it applies to: stripe, mail, crm, oncely, hubspot, slack, resend, github.
	Fake string `json:"fake"`
	// Route is "METHOD /pattern" as the fake documents it; "" for every route.
	Route string `json:"route,omitempty"`
	// Attempt is the 1-based request on Route the rule hits; 0 for every one.
	Attempt int `json:"attempt,omitempty"`
	// Action is FailBeforeCommit, DropBeforeCommit, CommitThenDrop,
	// CommitThenError or Delay.
	Action string `json:"action"`
	// Status of FailBeforeCommit and CommitThenError (default 500).
	Status int `json:"status,omitempty"`
	// RetryAfter and Delay are durations ("1s").
	RetryAfter string `json:"retry_after,omitempty"`
	Delay      string `json:"delay,omitempty"`
	SaveError  bool   `json:"save_error,omitempty"`
}

var faultActions = map[string]fault.Action{
	"FailBeforeCommit": fault.FailBeforeCommit,
	"DropBeforeCommit": fault.DropBeforeCommit,
	"CommitThenDrop":   fault.CommitThenDrop,
	"CommitThenError":  fault.CommitThenError,
	"Delay":            fault.Delay,
}

const faultHelp = "a fault is fake=stripe,action=CommitThenDrop[,route=POST /v1/refunds][,attempt=1][,status=503][,retry_after=1s][,delay=2s][,save_error=true]"

// parseFaultFlag reads key=value pairs separated by commas.
func parseFaultFlag(s string) (faultSpec, error) {
	var f faultSpec
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return f, usageErr(faultHelp, "--fault %q: %q is not key=value", s, kv)
		}
		var err error
		switch k {
		case "fake":
			f.Fake = v
		case "route":
			f.Route = v
		case "attempt":
			f.Attempt, err = strconv.Atoi(v)
		case "action":
			f.Action = v
		case "status":
			f.Status, err = strconv.Atoi(v)
		case "retry_after":
			f.RetryAfter = v
		case "delay":
			f.Delay = v
		case "save_error":
			f.SaveError, err = strconv.ParseBool(v)
		default:
			return f, usageErr(faultHelp, "--fault %q: unknown key %q", s, k)
		}
		if err != nil {
			return f, usageErr(faultHelp, "--fault %q: %s: %v", s, k, err)
		}
	}
	return f, nil
}

// rule checks the spec and returns its fault.Rule.
func (f faultSpec) rule() (fault.Rule, error) {
	bad := func(format string, args ...any) (fault.Rule, error) {
		return fault.Rule{}, usageErr(faultHelp, "fault rule: "+format, args...)
	}
	if !slices.Contains(fakeNames, f.Fake) {
		return bad("unknown fake %q (%s)", f.Fake, strings.Join(fakeNames, ", "))
	}
	a, ok := faultActions[f.Action]
	if !ok {
		return bad("unknown action %q (FailBeforeCommit, DropBeforeCommit, CommitThenDrop, CommitThenError, Delay)", f.Action)
	}
	if f.Attempt < 0 {
		return bad("negative attempt %d", f.Attempt)
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return bad("status %d is not an error status", f.Status)
	}
	r := fault.Rule{Route: f.Route, Attempt: f.Attempt, Action: a, Status: f.Status, SaveError: f.SaveError}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{f.RetryAfter, &r.RetryAfter}, {f.Delay, &r.Delay}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil || v < 0 {
			return bad("%q is not a duration like 1s", d.s)
		}
		*d.dst = v
	}
	return r, nil
}

// readFaultsFile reads a JSON array of fault rules.
func readFaultsFile(path string) ([]faultSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("--faults-file names a JSON file: [{\"fake\": \"stripe\", \"action\": \"CommitThenDrop\"}]", "%v", err)
	}
	var specs []faultSpec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&specs); err != nil {
		return nil, usageErr("--faults-file is a JSON array of rules with fake, action, route, attempt, status, retry_after, delay, save_error", "%s: %v", path, err)
	}
	return specs, nil
}

func newServeFakesCmd() *cobra.Command {
	var (
		ports      = make([]int, len(fakeNames))
		faultFlags []string
		faultsFile string
		rate       float64
		seed       int64
		indexLag   time.Duration
		asJSON     bool
		limits     fakeLimits
	)
	cmd := &cobra.Command{
		Use:   "serve-fakes",
		Short: "Run the fake providers as standalone servers on loopback",
		Long: `Run the fake providers (stripe, mail, crm, oncely, hubspot, slack, resend, github) as HTTP servers on
127.0.0.1, for tests in any language, until SIGINT or SIGTERM (exit 0).

Each fake serves its API and, next to it:
  GET  /_oncely/journal   the effects it committed, oldest first (JSON array of
                        {seq, kind, id, key, params, at})
  GET  /_oncely/faults    the faults it applied
  POST /_oncely/reset     forget every object and effect

Faults: --fault (repeatable) or --faults-file with a JSON array of the
same rules, and --fault-rate for random faults drawn from --seed.

Rate limits: the fake GitHub limits at GitHub's documented rates for an
authenticated user (5,000 requests an hour, 30 searches a minute), which
its clients read from the X-RateLimit-* headers every answer carries and
from GET /rate_limit. The others are off unless a flag sets them: their
official clients do not read a limit ahead of a 429, and the documented
rates (Resend: 2 requests a second; HubSpot: 100 to 190 per 10 seconds;
Slack: about one post a second per channel, bursts allowed) would refuse
ordinary test traffic. Once set, every answer carries the headers its
provider sends (Resend ratelimit-*, HubSpot X-HubSpot-RateLimit-*), and a
refusal Retry-After; 0 turns a limit off.`,
		Example: `  oncely serve-fakes --json
  oncely serve-fakes --stripe-port 12111 --fault 'fake=stripe,route=POST /v1/refunds,attempt=1,action=CommitThenDrop'`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	for i, name := range fakeNames {
		f.IntVar(&ports[i], name+"-port", 0, "port of the fake "+name+" (0: a free port)")
	}
	f.StringArrayVar(&faultFlags, "fault", nil, faultHelp)
	f.StringVar(&faultsFile, "faults-file", "", "JSON file with an array of fault rules")
	f.Float64Var(&rate, "fault-rate", 0, "fraction (0 to 1) of requests that get a random fault")
	f.Int64Var(&seed, "seed", 1, "seed of object ids and random faults")
	f.DurationVar(&indexLag, "index-lag", 0, "how long new objects stay invisible to search (stripe, mail, github) and Slack messages to history")
	f.BoolVar(&asJSON, "json", false, "print the URLs as JSON")
	f.IntVar(&limits.githubCore, "github-rate-limit", 5000, "the fake GitHub's core requests per hour (0: no limit, no X-RateLimit headers)")
	f.IntVar(&limits.githubSearch, "github-search-rate-limit", 30, "the fake GitHub's searches per minute (0: no limit)")
	f.IntVar(&limits.resend, "resend-rate-limit", 0, "the fake Resend's requests per second per API key (Resend's default: 2; 0: no limit, no ratelimit-* headers)")
	f.IntVar(&limits.hubspot, "hubspot-rate-limit", 0, "the fake HubSpot's requests per --hubspot-rate-window (HubSpot: 100 to 190 per 10s; 0: no limit)")
	f.DurationVar(&limits.hubspotWindow, "hubspot-rate-window", 10*time.Second, "the rolling window of --hubspot-rate-limit")
	f.IntVar(&limits.slackPosts, "slack-posts-per-second", 0, "the fake Slack's chat.postMessage per second per channel (Slack: about 1; 0: no limit)")
	f.IntVar(&limits.slackHistory, "slack-history-per-minute", 0, "the fake Slack's conversations.history per minute (Slack's Tier 3: 50; 0: no limit)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var specs []faultSpec
		if faultsFile != "" {
			s, err := readFaultsFile(faultsFile)
			if err != nil {
				return err
			}
			specs = s
		}
		for _, s := range faultFlags {
			spec, err := parseFaultFlag(s)
			if err != nil {
				return err
			}
			specs = append(specs, spec)
		}
		rules := make([]fault.Rule, len(specs))
		for i, s := range specs {
			r, err := s.rule()
			if err != nil {
				return err
			}
			rules[i] = r
		}
		if rate < 0 || rate > 1 {
			return usageErr("--fault-rate is between 0 and 1", "--fault-rate %v", rate)
		}
		if indexLag < 0 {
			return usageErr("--index-lag is a duration like 2s", "--index-lag is negative")
		}
		if limits.githubCore < 0 || limits.githubSearch < 0 || limits.resend < 0 || limits.hubspot < 0 || limits.slackPosts < 0 || limits.slackHistory < 0 || limits.hubspotWindow <= 0 {
			return usageErr("a rate limit is a count, 0 for none; --hubspot-rate-window a positive duration", "a negative rate limit")
		}
		cfg := fakeConfig{seed: seed, indexLag: indexLag, ports: map[string]int{}, limits: limits}
		for i, name := range fakeNames {
			if ports[i] < 0 || ports[i] > 65535 {
				return usageErr("a port is between 0 and 65535", "--%s-port %d", name, ports[i])
			}
			cfg.ports[name] = ports[i]
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		set, err := startFakes(cfg)
		if err != nil {
			return opErr(err, "choose another port, or 0 for a free one")
		}
		for i, r := range rules {
			set.servers[specs[i].Fake].faults.Add(r)
		}
		if rate > 0 {
			for _, fs := range set.servers {
				fs.faults.SetRandom(rate)
			}
		}
		if err := printFakes(cmd, set, asJSON); err != nil {
			set.close()
			return opErr(err, "")
		}
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := set.shutdown(sctx); err != nil {
			set.close()
		}
		return nil
	}
	return cmd
}

func printFakes(cmd *cobra.Command, set *fakeSet, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		m := map[string]map[string]string{}
		for _, name := range fakeNames {
			u := set.servers[name].url
			m[name] = map[string]string{"url": u, "journal": u + controlPrefix + "journal"}
		}
		enc := json.NewEncoder(out)
		return enc.Encode(m)
	}
	t := newTable("FAKE", "URL", "JOURNAL")
	for _, name := range fakeNames {
		u := set.servers[name].url
		t.row(name, u, u+controlPrefix+"journal")
	}
	t.write(out, coloursFor(out))
	_, err := fmt.Fprintln(out, "serving until SIGINT or SIGTERM")
	return err
}
