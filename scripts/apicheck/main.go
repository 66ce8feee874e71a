// Command apicheck holds the line on the module's API: it compares the
// exported API of the working tree with the snapshot in api/baseline.export
// (golang.org/x/exp/cmd/apidiff, fetched through the module proxy at the
// version pinned below) and fails on an incompatible change to a stable
// package unless CHANGELOG.md's unreleased section names it.
//
//	go run ./scripts/apicheck          check (make api-check; CI runs it)
//	go run ./scripts/apicheck -write   write the snapshot (make api-snapshot, at a release)
//
// A package is stable unless api/experimental.txt lists it (a package
// path relative to the module, or a prefix ending in "/"); internal
// packages are not API. An incompatible change is named when the
// unreleased section (the first "## [" heading that says "unreleased")
// holds its name in backquotes: the package's last element and the
// identifier, as apidiff reports it but with methods written T.M
// (`client.Canonicalize`, `ledgerpg.OpenURL`, `client.Config.Clock`,
// `stripe.Refund.Check`), or the relative path of a removed package
// (`providers/oncelyhttp`).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// apidiff is the pinned tool; go run fetches it through the module proxy.
const apidiff = "golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4"

const (
	module       = "github.com/oncely/oncely"
	baseline     = "api/baseline.export"
	experimental = "api/experimental.txt"
	changelog    = "CHANGELOG.md"
)

func main() {
	write := flag.Bool("write", false, "write the snapshot of the working tree's API to "+baseline)
	flag.Parse()
	if *write {
		if err := run(nil, "-m", "-w", baseline, module); err != nil {
			fatal(err)
		}
		fmt.Println("apicheck: wrote", baseline)
		return
	}
	var out bytes.Buffer
	if err := run(&out, "-m", "-incompatible", baseline, module); err != nil {
		fatal(err)
	}
	exp, err := readExperimental(experimental)
	if err != nil {
		fatal(err)
	}
	log, err := os.ReadFile(changelog)
	if err != nil {
		fatal(err)
	}
	named := unreleased(string(log))
	var unnamed, notes []change
	for _, c := range parse(out.String()) {
		switch {
		case exp.has(c.pkg):
			notes = append(notes, c)
		case !mentions(named, c.name):
			unnamed = append(unnamed, c)
		}
	}
	for _, c := range notes {
		fmt.Printf("apicheck: experimental %s: %s\n", c.pkg, c.line)
	}
	if len(unnamed) > 0 {
		fmt.Printf("apicheck: %d incompatible change(s) to stable packages that %s's unreleased section does not name:\n", len(unnamed), changelog)
		for _, c := range unnamed {
			fmt.Printf("  `%s`  (%s)\n", c.name, c.line)
		}
		fmt.Println("apicheck: restore compatibility, or name each change (in backquotes, as above) where the changelog says what changed")
		os.Exit(1)
	}
	fmt.Printf("apicheck: ok (baseline %s; incompatible changes to stable packages are named in %s)\n", baseline, changelog)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "apicheck:", err)
	os.Exit(2)
}

// run runs apidiff with args, its output to out (or stdout), dropping the
// lines it prints about the internal packages it skips.
func run(out *bytes.Buffer, args ...string) error {
	cmd := exec.Command("go", append([]string{"run", apidiff}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out != nil {
		cmd.Stdout = out
	} else {
		cmd.Stdout = os.Stdout
	}
	err := cmd.Run()
	for line := range strings.SplitSeq(strings.TrimRight(stderr.String(), "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "Ignoring internal package") {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	if err != nil {
		return fmt.Errorf("go run %s: %w", apidiff, err)
	}
	return nil
}

// change is one incompatible change apidiff reported.
type change struct {
	pkg  string // relative to the module; "" for the root package
	name string // what the changelog must name
	line string // apidiff's report
}

var (
	// - ./ledger/ledgerpg.OpenURL: changed from ... to ...
	memberRE = regexp.MustCompile(`^- \./((?:[\w-]+/)*[\w-]*)\.([^:]+): (.*)$`)
	// - package github.com/oncely/oncely/fakes/oncelyfake: removed
	packageRE = regexp.MustCompile(`^- package (\S+): (.*)$`)
	// (*Refund).Check, (Refund).Check
	methodRE = regexp.MustCompile(`^\(\*?(\w+)\)\.`)
)

// parse reads apidiff's -incompatible report.
func parse(report string) []change {
	var out []change
	sc := bufio.NewScanner(strings.NewReader(report))
	for sc.Scan() {
		line := sc.Text()
		if m := memberRE.FindStringSubmatch(line); m != nil {
			pkg := m[1]
			elem := pkg[strings.LastIndex(pkg, "/")+1:]
			if pkg == "" {
				elem = "oncely"
			}
			sel := methodRE.ReplaceAllString(m[2], "$1.")
			out = append(out, change{pkg: pkg, name: elem + "." + sel, line: strings.TrimPrefix(line, "- ")})
			continue
		}
		if m := packageRE.FindStringSubmatch(line); m != nil {
			rel := strings.TrimPrefix(strings.TrimPrefix(m[1], module), "/")
			out = append(out, change{pkg: rel, name: rel, line: strings.TrimPrefix(line, "- ")})
		}
	}
	return out
}

// prefixes is the list of experimental packages.
type prefixes []string

func (p prefixes) has(pkg string) bool {
	for _, e := range p {
		if pkg == e || (strings.HasSuffix(e, "/") && strings.HasPrefix(pkg, e)) {
			return true
		}
	}
	return false
}

// readExperimental reads the list: a package or prefix per line, "#"
// starting a comment.
func readExperimental(path string) (prefixes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p prefixes
	for line := range strings.SplitSeq(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			p = append(p, line)
		}
	}
	return p, nil
}

// unreleased returns the changelog's unreleased section: from the first
// "## [" heading that says "unreleased" to the next "## " heading. With
// none, nothing is named.
func unreleased(log string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(log, "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "## [") && strings.Contains(strings.ToLower(line), "unreleased")
		}
		if in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// mentions reports whether section names name in backquotes: `name`
// followed by anything but more of an identifier or selector.
func mentions(section, name string) bool {
	return regexp.MustCompile("`" + regexp.QuoteMeta(name) + `([^\w.]|$)`).MatchString(section)
}
