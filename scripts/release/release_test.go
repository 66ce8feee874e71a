package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// fixture is a txtar archive of testdata: a comment, then "-- name --"
// sections, one per file.
type fixture struct {
	comment string
	files   map[string]string
}

func readFixture(t *testing.T, name string) fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	fx := fixture{files: map[string]string{}}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur == "" {
			fx.comment = b.String()
		} else {
			fx.files[cur] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		b.WriteString(line)
	}
	flush()
	return fx
}

// write lays the fixture's files (but its want) out in a new directory.
func (fx fixture) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range fx.files {
		if name == "want" {
			continue
		}
		file := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (fx fixture) want() []string {
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(fx.files["want"]), "\n") {
		if l != "" {
			want = append(want, l)
		}
	}
	return want
}

// TestCheckFixtures runs check on each fixture of testdata and compares
// its problems with the fixture's want section: none for ok.txtar; a
// replace in a nested go.mod, a requirement at a version that is not
// being released, one on an unlisted module and a go.work out of step in
// the others.
func TestCheckFixtures(t *testing.T) {
	names, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(names) < 5 {
		t.Fatalf("fixtures: %v %v", names, err)
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			fx := readFixture(t, filepath.Base(name))
			r, err := loadRepo(fx.write(t))
			if err != nil {
				t.Fatal(err)
			}
			got, err := check(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := fx.want(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("%s\nproblems:\n  %s\nwant:\n  %s", fx.comment, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// TestTheRepositoryAgrees runs the check on this repository: the lead's
// merges keep versions.yaml, the go.mod files and the go.work files in
// step.
func TestTheRepositoryAgrees(t *testing.T) {
	r, err := loadRepo(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := check(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(r.Modules) < 2 {
		t.Fatalf("versions.yaml lists %d modules", len(r.Modules))
	}
}

func TestLoadRepoRejects(t *testing.T) {
	for _, tc := range []struct {
		name, edit, want string
	}{
		{"unlisted go.mod", "examples/a/infra", "is neither in a module set nor in excluded-modules"},
		{"bad version", "version", `version "v1.2" is not a canonical semantic version`},
		{"listed twice", "twice", "is listed twice"},
		{"no such module", "ghost", "no go.mod of the repository declares it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := readFixture(t, "ok.txtar")
			v := fx.files["versions.yaml"]
			switch tc.edit {
			case "examples/a/infra":
				v = strings.Replace(v, "  - example.com/demo/examples/a/infra\n", "", 1)
			case "version":
				v = strings.Replace(v, "v1.2.0", "v1.2", 1)
			case "twice":
				v = strings.Replace(v, "      - example.com/demo/agent/a\n", "      - example.com/demo/agent/a\n      - example.com/demo/agent/a\n", 1)
			case "ghost":
				v = strings.Replace(v, "      - example.com/demo/agent/a\n", "      - example.com/demo/agent/a\n      - example.com/demo/agent/ghost\n", 1)
			}
			if v == fx.files["versions.yaml"] {
				t.Fatal("the edit changed nothing")
			}
			fx.files["versions.yaml"] = v
			_, err := loadRepo(fx.write(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadRepo: %v, want %q", err, tc.want)
			}
		})
	}
}

func gitRepo(t *testing.T, fx fixture) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	dir := fx.write(t)
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fixture"},
	} {
		if _, err := git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTag tags every module once, then refuses: when a tag exists, when
// the check fails (creating no tag) and when the tree is not committed.
func TestTag(t *testing.T) {
	dir := gitRepo(t, readFixture(t, "ok.txtar"))
	r, err := loadRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tag(r, &out, false); err != nil {
		t.Fatal(err)
	}
	tags, _ := git(dir, "tag", "--list")
	if got, want := strings.Fields(tags), []string{"agent/a/v1.2.0", "examples/a/v1.2.0", "v1.2.0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tags %v, want %v", got, want)
	}
	if err := tag(r, &out, false); err == nil || !strings.Contains(err.Error(), "already exist") {
		t.Fatalf("second tag: %v", err)
	}

	bad := gitRepo(t, readFixture(t, "replace.txtar"))
	r, err = loadRepo(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := tag(r, &out, false); err == nil || !strings.Contains(err.Error(), "must not replace") {
		t.Fatalf("tag with a replace: %v", err)
	}
	if tags, _ := git(bad, "tag", "--list"); tags != "" {
		t.Fatalf("tags created after a failed check: %s", tags)
	}

	dirty := gitRepo(t, readFixture(t, "ok.txtar"))
	os.WriteFile(filepath.Join(dirty, "demo.go"), []byte("package demo // changed\n"), 0o644)
	r, err = loadRepo(dirty)
	if err != nil {
		t.Fatal(err)
	}
	if err := tag(r, &out, false); err == nil || !strings.Contains(err.Error(), "uncommitted") {
		t.Fatalf("tag of a dirty tree: %v", err)
	}
}

// TestSync brings the fixtures with a wrong version or a replace into
// step; the check then passes.
func TestSync(t *testing.T) {
	for _, name := range []string{"oldversion.txtar", "replace.txtar", "work.txtar"} {
		t.Run(name, func(t *testing.T) {
			fx := readFixture(t, name)
			if name == "work.txtar" { // sync fixes versions, not use lists
				fx.files["go.work"] = strings.Replace(fx.files["go.work"], "\t./examples/a/infra\n", "", 1)
				fx.files["go.work"] = strings.Replace(fx.files["go.work"], "\texample.com/demo v1.1.0 => ./\n", "\texample.com/demo v1.1.0 => ./\n\texample.com/demo/agent/a => ./agent/a\n", 1)
			}
			dir := fx.write(t)
			r, err := loadRepo(dir)
			if err != nil {
				t.Fatal(err)
			}
			if before, _ := check(r); len(before) == 0 {
				t.Fatal("the fixture passes the check before sync")
			}
			var out bytes.Buffer
			if err := sync(r, &out); err != nil {
				t.Fatal(err)
			}
			after, err := check(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(after) > 0 {
				t.Fatalf("after sync (%s):\n  %s", out.String(), strings.Join(after, "\n  "))
			}
		})
	}
}

// TestWriteProxy lays out the modules in the proxy's layout; the root's
// zip holds its files but not the nested modules' nor an ignored file.
func TestWriteProxy(t *testing.T) {
	fx := readFixture(t, "ok.txtar")
	fx.files[".gitignore"] = "ignored.txt\n"
	fx.files["ignored.txt"] = "not in the zip\n"
	fx.files["untracked.go"] = "package demo\n"
	dir := gitRepo(t, fx)
	os.WriteFile(filepath.Join(dir, "new.go"), []byte("package demo\n"), 0o644) // untracked, not ignored
	r, err := loadRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	if err := writeProxy(r, proxy, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	v := filepath.Join(proxy, "example.com", "demo", "@v")
	list, _ := os.ReadFile(filepath.Join(v, "list"))
	info, _ := os.ReadFile(filepath.Join(v, "v1.2.0.info"))
	mod, _ := os.ReadFile(filepath.Join(v, "v1.2.0.mod"))
	if string(list) != "v1.2.0\n" || string(info) != `{"Version":"v1.2.0","Time":"2026-12-01T00:00:00Z"}` || string(mod) != fx.files["go.mod"] {
		t.Fatalf("list %q info %q mod %q", list, info, mod)
	}
	zr, err := zip.OpenReader(filepath.Join(v, "v1.2.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var got []string
	for _, f := range zr.File {
		got = append(got, f.Name)
	}
	sort.Strings(got)
	want := []string{"example.com/demo@v1.2.0/.gitignore", "example.com/demo@v1.2.0/demo.go", "example.com/demo@v1.2.0/go.mod", "example.com/demo@v1.2.0/go.work", "example.com/demo@v1.2.0/new.go", "example.com/demo@v1.2.0/untracked.go", "example.com/demo@v1.2.0/versions.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("zip holds\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if _, err := os.Stat(filepath.Join(proxy, "example.com", "demo", "agent", "a", "@v", "v1.2.0.zip")); err != nil {
		t.Fatal(err)
	}
}

func TestQuickStart(t *testing.T) {
	readme := "# x\n\n## Install\n\n```go\nwrong()\n```\n\n## Quick start\n\nText.\n\n```sh\nno\n```\n\n```go\nfmt.Println(client.Name)\n// Output:\n// a\n```\n\n## Next\n"
	block, err := quickStart(readme)
	if err != nil {
		t.Fatal(err)
	}
	if block != "fmt.Println(client.Name)\n// Output:\n// a\n" {
		t.Fatalf("block %q", block)
	}
	if want, ok := expectedOutput(block); !ok || want != "a" {
		t.Fatalf("output %q %v", want, ok)
	}
	src, err := program(block, map[string][]string{"fmt": {"fmt"}, "client": {"example.com/demo/client"}, "exec": {"os/exec"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "import (\n\t\"example.com/demo/client\"\n\t\"fmt\"\n)") || !strings.Contains(src, "func main() {\n\tfmt.Println(client.Name)") {
		t.Fatalf("program:\n%s", src)
	}
	// A local variable named like a package is not imported.
	src, err = program("exec := 1\nfmt.Println(exec)\n", map[string][]string{"fmt": {"fmt"}, "exec": {"os/exec"}})
	if err != nil || strings.Contains(src, "os/exec") {
		t.Fatalf("program: %v\n%s", err, src)
	}
	for _, tc := range []struct{ readme, want string }{
		{"# x\n\n## Install\n", `no "Quick start" heading`},
		{"## Quick start\n\n```sh\nx\n```\n\n## Next\n\n```go\nx\n```\n", "section has no ```go block"},
		{"## Quick start\n\n```go\nx\n", "not closed"},
	} {
		if _, err := quickStart(tc.readme); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("quickStart(%q): %v, want %q", tc.readme, err, tc.want)
		}
	}
	if _, err := program("rand.Int()\n", map[string][]string{"rand": {"math/rand", "crypto/rand"}}); err == nil || !strings.Contains(err.Error(), "several packages") {
		t.Fatalf("ambiguous: %v", err)
	}
}

// TestREADMEQuickStart: the README has the block release-check builds.
func TestREADMEQuickStart(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, err := quickStart(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(block, "client.") {
		t.Fatalf("the Quick start uses no client:\n%s", block)
	}
}

// TestArchives writes a tar.gz and a zip and their checksums, which
// sha256sum -c accepts, and which fail once an archive changes.
func TestArchives(t *testing.T) {
	src := t.TempDir()
	bin := filepath.Join(src, "oncely")
	os.WriteFile(bin, []byte("#!/bin/sh\necho hello\n"), 0o755)
	doc := filepath.Join(src, "LICENSE")
	os.WriteFile(doc, []byte("licence\n"), 0o644)
	out := t.TempDir()
	stamp := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	files := []archived{{"oncely", bin, 0o755}, {"LICENSE", doc, 0o644}}
	names := []string{archiveName("v0.2.0", "linux", "amd64"), archiveName("v0.2.0", "windows", "arm64")}
	if names[0] != "oncely_0.2.0_linux_amd64.tar.gz" || names[1] != "oncely_0.2.0_windows_arm64.zip" {
		t.Fatalf("names %v", names)
	}
	for _, n := range names {
		if err := writeArchive(filepath.Join(out, n), files, stamp); err != nil {
			t.Fatal(err)
		}
	}
	sums := checksumsName("v0.2.0")
	if err := writeChecksums(out, sums, names); err != nil {
		t.Fatal(err)
	}
	if n, err := verifyChecksums(out, sums); err != nil || n != 2 {
		t.Fatalf("verify: %d %v", n, err)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		if out, err := run(out, nil, time.Minute, "sha256sum", "-c", sums); err != nil {
			t.Fatal(err)
		} else if strings.Count(out, ": OK") != 2 {
			t.Fatalf("sha256sum -c: %s", out)
		}
	}
	unpacked := t.TempDir()
	if err := untar(filepath.Join(out, names[0]), unpacked); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(unpacked, "oncely"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("unpacked binary: %v %v", info, err)
	}
	zr, err := zip.OpenReader(filepath.Join(out, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := zr.File[0].Open()
	data, _ := io.ReadAll(f)
	zr.Close()
	if zr.File[0].Name != "oncely" || string(data) != "#!/bin/sh\necho hello\n" {
		t.Fatalf("zip entry %s: %q", zr.File[0].Name, data)
	}
	// The same inputs give the same archive.
	again := filepath.Join(t.TempDir(), names[0])
	writeArchive(again, files, stamp)
	a, _ := os.ReadFile(again)
	b, _ := os.ReadFile(filepath.Join(out, names[0]))
	if !bytes.Equal(a, b) {
		t.Fatal("archives differ between two runs")
	}
	os.WriteFile(filepath.Join(out, names[1]), []byte("tampered"), 0o644)
	if _, err := verifyChecksums(out, sums); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Fatalf("tampered archive: %v", err)
	}
}
