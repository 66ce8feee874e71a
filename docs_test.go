package oncely_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The documentation is README.md and every Markdown file under docs/.
// Two tests hold it to the code: every Go code block is quoted from Go
// code that the tests compile and run, and every link resolves.

// docFiles returns README.md and the Markdown files under docs/, as
// slash-separated paths relative to the repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// codeBlock is a fenced code block of a Markdown file.
type codeBlock struct {
	lang string
	line int    // of the opening fence, from 1
	text string // without the fences, dedented and trimmed
}

// mdParse splits a Markdown file into its fenced code blocks and its
// other lines (prose; a code block's lines are blank there, so that line
// numbers stay).
func mdParse(src string) (blocks []codeBlock, prose []string) {
	lines := strings.Split(src, "\n")
	prose = make([]string, len(lines))
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " \t")
		fence := ""
		for _, f := range []string{"```", "~~~"} {
			if strings.HasPrefix(trimmed, f) {
				fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, f[:1]))]
			}
		}
		if fence == "" {
			prose[i] = lines[i]
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				break
			}
			body = append(body, lines[i])
		}
		lang := ""
		if info := strings.Fields(strings.TrimPrefix(trimmed, fence)); len(info) > 0 {
			lang = info[0]
		}
		blocks = append(blocks, codeBlock{
			lang: lang,
			line: start + 1,
			text: dedent(body),
		})
	}
	return blocks, prose
}

// dedent removes the indentation common to every non-blank line and the
// blank lines around the text.
func dedent(lines []string) string {
	common := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			common, first = ind, false
			continue
		}
		for !strings.HasPrefix(ind, common) {
			common = common[:len(common)-1]
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(strings.TrimPrefix(l, common), " \t")
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}

// quotable reports whether a Go file's code is compiled and run by the
// tests: a _test.go file (an Example function, or a test's code), or a
// file of a package that has tests (a tested example program, such as
// examples/quickstart, whose test runs it).
func quotable(file string, testDirs map[string]bool) bool {
	return strings.HasSuffix(file, "_test.go") || testDirs[filepath.Dir(file)]
}

// goSources returns the text of every Go file of the repository that the
// tests compile and run (see quotable), every module included.
func goSources(t *testing.T) map[string]string {
	t.Helper()
	var files []string
	testDirs := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			files = append(files, p)
			if strings.HasSuffix(p, "_test.go") {
				testDirs[filepath.Dir(p)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]string{}
	for _, f := range files {
		if !quotable(f, testDirs) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src[filepath.ToSlash(f)] = string(b)
	}
	return src
}

// quotes reports whether the Go source holds block verbatim, at any one
// indentation: each of its lines is the block's line behind the same
// prefix of white space (a blank line matches a blank line).
func quotes(source, block string) bool {
	want := strings.Split(block, "\n")
	lines := strings.Split(source, "\n")
	for i, l := range lines {
		if len(lines)-i < len(want) || !strings.HasSuffix(l, want[0]) {
			continue
		}
		prefix := strings.TrimSuffix(l, want[0])
		if strings.TrimLeft(prefix, " \t") != "" {
			continue
		}
		ok := true
		for j, w := range want[1:] {
			got := strings.TrimRight(lines[i+1+j], " \t")
			if w == "" && strings.TrimSpace(got) == "" {
				continue
			}
			if got != prefix+w {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDocsGoBlocksAreTested checks that every ```go block of README.md
// and docs/ is quoted verbatim (after removing its common indentation)
// from a Go file that the tests compile and run: the body of an Example
// function (go test runs it, and checks its // Output:), a test's code,
// or a tested example program (examples/quickstart, the Quick start,
// which its test runs). A block edited in the docs alone, or code
// changed without its docs, fails here.
func TestDocsGoBlocksAreTested(t *testing.T) {
	t.Parallel()
	sources := goSources(t)
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	slices.Sort(names)
	checked := 0
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks, _ := mdParse(string(b))
		for _, blk := range blocks {
			if blk.lang != "go" {
				continue
			}
			checked++
			if strings.TrimSpace(blk.text) == "" {
				t.Errorf("%s:%d: an empty Go block", doc, blk.line)
				continue
			}
			if !slices.ContainsFunc(names, func(n string) bool { return quotes(sources[n], blk.text) }) {
				first, _, _ := strings.Cut(blk.text, "\n")
				t.Errorf("%s:%d: the Go block starting %q is in no tested Go file (an Example function or a tested example program): copy it from one, or make it one", doc, blk.line, first)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d Go blocks; the docs hold more: is the parser broken?", checked)
	}
	t.Logf("%d Go blocks, each quoted from a tested Go file", checked)
}

// TestQuotes checks the matcher of TestDocsGoBlocksAreTested on a block
// that is quoted, one quoted at another indentation, and ones that are
// not (a changed line, lines out of place).
func TestQuotes(t *testing.T) {
	t.Parallel()
	src := "func Example() {\n\tx := 1\n\n\tif x > 0 {\n\t\tfmt.Println(x)\n\t}\n}\n"
	for _, c := range []struct {
		block string
		want  bool
	}{
		{"x := 1\n\nif x > 0 {\n\tfmt.Println(x)\n}", true},
		{"fmt.Println(x)", true},
		{"x := 2", false},
		{"x := 1\nif x > 0 {", false},
		{"if x > 0 {\nfmt.Println(x)", false},
	} {
		if got := quotes(src, c.block); got != c.want {
			t.Errorf("quotes(%q) = %v, want %v", c.block, got, c.want)
		}
	}
}

// link is a link or image of a Markdown file.
type link struct {
	line   int
	target string
}

var (
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	mdLink     = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	autoLink   = regexp.MustCompile(`<(https?://[^>\s]*)>`)
)

// mdLinks returns the links of a Markdown file's prose (inline links,
// images and autolinks; not those in code).
func mdLinks(src string) []link {
	_, prose := mdParse(src)
	text := inlineCode.ReplaceAllStringFunc(strings.Join(prose, "\n"), func(s string) string {
		return strings.Repeat(" ", len(s)-strings.Count(s, "\n")) + strings.Repeat("\n", strings.Count(s, "\n"))
	})
	var links []link
	for _, re := range []*regexp.Regexp{mdLink, autoLink} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			links = append(links, link{line: 1 + strings.Count(text[:m[0]], "\n"), target: text[m[2]:m[3]]})
		}
	}
	return links
}

// mdAnchors returns the anchors GitHub gives a Markdown file's headings:
// the heading's text, lower case, without its markup and punctuation
// (letters, digits, marks, '_', '-' and spaces stay), spaces made '-',
// and "-1", "-2", ... after repeats.
func mdAnchors(src string) map[string]bool {
	_, prose := mdParse(src)
	anchors := map[string]bool{}
	seen := map[string]int{}
	linkText := regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	for _, l := range prose {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimLeft(l, "#")
		if len(l)-len(text) > 6 || (text != "" && text[0] != ' ' && text[0] != '\t') {
			continue
		}
		text = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), "#"))
		text = linkText.ReplaceAllString(text, "$1")
		text = strings.NewReplacer("`", "", "*", "").Replace(text)
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// checkLink returns what is wrong with a link of the Markdown file doc
// (a path relative to root), or "": a relative link must name a file or
// directory of the repository, and its #anchor a heading of that
// Markdown file; an absolute http(s) link must be well formed (it is not
// fetched: the tests run offline).
func checkLink(root, doc, target string) string {
	if target == "" {
		return "an empty link"
	}
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Sprintf("not a URL: %v", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" || strings.ContainsAny(target, " \t") {
			return "an absolute link without a host"
		}
		return ""
	case "mailto":
		if u.Opaque == "" {
			return "a mailto link without an address"
		}
		return ""
	case "":
	default:
		return fmt.Sprintf("a link of scheme %q", u.Scheme)
	}
	if u.Host != "" || strings.HasPrefix(u.Path, "/") {
		return "a link from the root of a site: make it relative"
	}
	file := doc
	if u.Path != "" {
		file = path.Join(path.Dir(doc), u.Path)
		if file == ".." || strings.HasPrefix(file, "../") {
			return "a link out of the repository"
		}
	}
	st, err := os.Stat(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return fmt.Sprintf("%s does not exist", file)
	}
	if u.Fragment == "" {
		return ""
	}
	if st.IsDir() || !strings.HasSuffix(file, ".md") {
		return fmt.Sprintf("an anchor #%s in %s, which is not a Markdown file", u.Fragment, file)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return err.Error()
	}
	if !mdAnchors(string(b))[u.Fragment] {
		return fmt.Sprintf("%s has no heading #%s", file, u.Fragment)
	}
	return ""
}

// TestDocsLinks checks every link of README.md and docs/ (checkLink).
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	n := 0
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdLinks(string(b)) {
			n++
			if msg := checkLink(".", doc, l.target); msg != "" {
				t.Errorf("%s:%d: link %q: %s", doc, l.line, l.target, msg)
			}
		}
	}
	if n < 20 {
		t.Errorf("checked %d links; the docs hold more: is the parser broken?", n)
	}
	t.Logf("%d links checked", n)
}

// TestCheckLink runs the link check on a small tree of its own, with
// links that resolve and links that do not.
func TestCheckLink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# oncely\n\n## Quick start\n\n## What the model is told\n\n## Redis / Valkey\n\n## `oncely mcp`, the gateway\n\n## Setup\n\n## Setup\n\n```\n## Not a heading\n```\n")
	write("docs/guide.md", "# A guide\n\n## Sizing and cost\n")
	write("main.go", "package main\n")
	for _, c := range []struct {
		doc, target string
		ok          bool
	}{
		{"README.md", "docs/guide.md", true},
		{"README.md", "docs/guide.md#sizing-and-cost", true},
		{"README.md", "docs/", true},
		{"README.md", "main.go", true},
		{"README.md", "#quick-start", true},
		{"README.md", "#what-the-model-is-told", true},
		{"README.md", "#redis--valkey", true},
		{"README.md", "#oncely-mcp-the-gateway", true},
		{"README.md", "#setup-1", true},
		{"docs/guide.md", "../README.md#quick-start", true},
		{"docs/guide.md", "https://example.com/a?b=c#d", true},
		{"docs/guide.md", "mailto:ops@example.com", true},
		{"README.md", "docs/missing.md", false},
		{"README.md", "docs/guide.md#sizing", false},
		{"README.md", "#not-a-heading", false},
		{"README.md", "#setup-2", false},
		{"README.md", "main.go#main", false},
		{"docs/guide.md", "README.md", false},
		{"docs/guide.md", "../../outside.md", false},
		{"README.md", "/docs/guide.md", false},
		{"README.md", "https://", false},
		{"README.md", "ftp://example.com/x", false},
		{"README.md", "", false},
	} {
		msg := checkLink(root, c.doc, c.target)
		if (msg == "") != c.ok {
			t.Errorf("checkLink(%s, %q) = %q, want ok=%v", c.doc, c.target, msg, c.ok)
		}
	}
	// The links of a file are found in its prose, not in its code.
	got := mdLinks("See [a](a.md) and ![b](b.png \"B\")\n`[c](c.md)`\n```\n[d](d.md)\n```\n[e\nf](e.md) <https://example.com>\n")
	var targets []string
	for _, l := range got {
		targets = append(targets, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	slices.Sort(targets)
	if want := []string{"1:a.md", "1:b.png", "6:e.md", "7:https://example.com"}; !slices.Equal(targets, want) {
		t.Errorf("mdLinks = %v, want %v", targets, want)
	}
}
