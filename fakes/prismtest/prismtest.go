package prismtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/nodetools"
)

// StartTimeout bounds how long Start waits for Prism to answer.
const StartTimeout = 2 * time.Minute

// Violation is one finding of Prism about a request or a response.
type Violation struct {
	// Request is the method and path of the exchange ("POST /emails").
	Request string
	// Location is where Prism found it ("request.body.to", "response.body").
	Location string
	// Severity is "error" or "warning" (also "info", "hint").
	Severity string
	// Code and Message say what was wrong.
	Code    string
	Message string
}

// String describes the violation in one line.
func (v Violation) String() string {
	return fmt.Sprintf("%s: %s %s: %s (%s)", v.Request, v.Severity, v.Location, v.Message, v.Code)
}

// Proxy is a running Prism validating proxy.
type Proxy struct {
	// URL is the proxy's base URL ("http://127.0.0.1:port"): send requests
	// here instead of to the upstream.
	URL string

	mu         sync.Mutex
	violations []Violation
	exchanges  int
}

// Start runs Prism as a validating proxy for the OpenAPI description at
// spec (a path, relative to the test's working directory or absolute) in
// front of upstream (a base URL), and stops it when tb ends. It skips tb
// when node or npm is missing (fails it under CI=true) and fails it when
// Prism cannot be installed or started.
func Start(tb testing.TB, spec, upstream string) *Proxy {
	tb.Helper()
	dir, node := nodetools.Dir(tb, "prism")
	abs, err := filepath.Abs(spec)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		tb.Fatalf("prismtest: the API description: %v", err)
	}
	p, err := start(context.Background(), dir, node, abs, upstream)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.stop)
	return p.proxy
}

// Transport returns a RoundTripper that sends through base
// (http.DefaultTransport when nil) and records what Prism reports about
// each exchange. Requests must go to URL.
func (p *Proxy) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &recorder{p: p, base: base}
}

// Client returns an HTTP client whose transport is Transport(nil).
func (p *Proxy) Client() *http.Client { return &http.Client{Transport: p.Transport(nil)} }

// Violations returns every finding recorded so far, warnings included.
func (p *Proxy) Violations() []Violation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Violation(nil), p.violations...)
}

// Errors returns the findings of severity error.
func (p *Proxy) Errors() []Violation { return p.filter(true) }

// Warnings returns the findings below severity error.
func (p *Proxy) Warnings() []Violation { return p.filter(false) }

func (p *Proxy) filter(errs bool) []Violation {
	var out []Violation
	for _, v := range p.Violations() {
		if (v.Severity == "error") == errs {
			out = append(out, v)
		}
	}
	return out
}

// Exchanges returns how many responses went through Transport.
func (p *Proxy) Exchanges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchanges
}

// Check fails tb with every violation of severity error recorded so far,
// and fails it when no exchange went through Transport at all (a test that
// validated nothing).
func (p *Proxy) Check(tb testing.TB) {
	tb.Helper()
	if p.Exchanges() == 0 {
		tb.Error("prismtest: no request went through the proxy's Transport")
	}
	for _, v := range p.Errors() {
		tb.Errorf("prismtest: %s", v)
	}
}

func (p *Proxy) record(vs []Violation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exchanges++
	p.violations = append(p.violations, vs...)
}

type recorder struct {
	p    *Proxy
	base http.RoundTripper
}

// RoundTrip sends req and records Prism's findings: a Prism problem
// answer (its body is read and put back) or an sl-violations header.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	target := req.Method + " " + req.URL.Path
	var vs []Violation
	if strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return nil, rerr
		}
		vs = parseProblem(target, body)
	}
	// Prism's problem repeats what its header lists: read the header only
	// when there is no problem of Prism's.
	if h := resp.Header.Get("sl-violations"); h != "" && len(vs) == 0 {
		vs = parseViolations(target, []byte(h))
	}
	r.p.record(vs)
	return resp, nil
}

// prismViolation is one entry of Prism's validation output.
type prismViolation struct {
	Location []string `json:"location"`
	Severity string   `json:"severity"`
	Code     any      `json:"code"`
	Message  string   `json:"message"`
}

func (v prismViolation) violation(target string) Violation {
	code := ""
	if v.Code != nil {
		code = fmt.Sprint(v.Code)
	}
	return Violation{Request: target, Location: strings.Join(v.Location, "."), Severity: strings.ToLower(v.Severity), Code: code, Message: v.Message}
}

func parseViolations(target string, b []byte) []Violation {
	var pvs []prismViolation
	if err := json.Unmarshal(b, &pvs); err != nil {
		return []Violation{{Request: target, Severity: "error", Code: "unreadable", Message: "sl-violations header: " + string(b)}}
	}
	out := make([]Violation, 0, len(pvs))
	for _, pv := range pvs {
		out = append(out, pv.violation(target))
	}
	return out
}

// prismProblem is Prism's own error answer.
type prismProblem struct {
	Type       string           `json:"type"`
	Title      string           `json:"title"`
	Status     int              `json:"status"`
	Detail     string           `json:"detail"`
	Validation []prismViolation `json:"validation"`
}

// parseProblem reads a problem answer: Prism's (its type names Prism's
// errors) is a violation, or several; an upstream problem is not.
func parseProblem(target string, b []byte) []Violation {
	var pb prismProblem
	if err := json.Unmarshal(b, &pb); err != nil || !strings.Contains(pb.Type, "prism/errors") {
		return nil
	}
	if len(pb.Validation) == 0 {
		msg := pb.Title
		if pb.Detail != "" {
			msg += ": " + pb.Detail
		}
		code := pb.Type
		if i := strings.LastIndex(code, "#"); i >= 0 {
			code = code[i+1:]
		}
		return []Violation{{Request: target, Location: "prism", Severity: "error", Code: code, Message: msg}}
	}
	out := make([]Violation, 0, len(pb.Validation))
	for _, pv := range pb.Validation {
		v := pv.violation(target)
		if v.Severity == "" {
			v.Severity = "error"
		}
		out = append(out, v)
	}
	return out
}
