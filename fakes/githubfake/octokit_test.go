//go:build unix

package githubfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/internal/nodetools"
)

// octokitDir is the folder of the pinned @octokit/rest (and
// @octokit/openapi), installed with npm ci from its committed lockfile.
func octokitDir(t *testing.T) string {
	t.Helper()
	dir, _ := nodetools.Dir(t, "octokit")
	return dir
}

// GitHub's official Node client, @octokit/rest, runs a scripted session
// against the fake unchanged: create, comment, get, paginate through the
// Link header, list comments, search, and GitHub's errors.
func TestOctokitSession(t *testing.T) {
	t.Parallel()
	dir := octokitDir(t)
	s, _ := newServer(t, &githubfake.Config{Token: "ghp_octokit"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "session.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GITHUB_API_URL="+s.URL, "GITHUB_TOKEN=ghp_octokit")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node session.mjs: %v\n%s", err, stderr.String())
	}
	var steps []struct {
		Step  string          `json:"step"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(out, &steps); err != nil {
		t.Fatalf("session output %q: %v", out, err)
	}
	want := map[string]string{
		"create":              `{"status":201,"number":1,"labels":["bug"],"user":"oncely-bot"}`,
		"comment":             `{"status":201,"issue_url_ends":true}`,
		"get":                 `{"title":"Export fails","comments":1,"state":"open"}`,
		"paginate":            `[3,2,1]`,
		"listComments":        `[true]`,
		"listCommentsForRepo": `1`,
		"search":              `{"total":1,"incomplete":false,"numbers":[1]}`,
		"searchComments":      `[1]`,
		"blankTitle":          `{"status":422,"message":"Validation Failed","errors":[{"resource":"Issue","field":"title","code":"missing_field"}]}`,
		"missingIssue":        `{"status":404,"message":"Not Found"}`,
		"unmodelled":          `{"status":501,"message":"githubfake: the fake does not model the body field \"milestone\" of POST /repos/{owner}/{repo}/issues; its answer says nothing about GitHub"}`,
		"badToken":            `{"status":401,"message":"Bad credentials"}`,
	}
	seen := map[string]bool{}
	for _, st := range steps {
		seen[st.Step] = true
		if w, ok := want[st.Step]; !ok || string(st.Value) != w {
			t.Errorf("step %s: %s\n want %s", st.Step, st.Value, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("step %s did not run", name)
		}
	}
	j := s.Journal()
	if len(j) != 4 || j[0].Key != "node-1" || j[3].Kind != githubfake.KindIssueComment || j[3].Key != "node-c1" {
		t.Errorf("journal %+v", j)
	}
}
