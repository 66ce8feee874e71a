package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// goCmd runs the go command in dir with extra environment variables (each
// replacing the variable of the same name) and returns its output (both
// streams); an error carries the command and its output.
func goCmd(dir string, env []string, args ...string) (string, error) {
	return run(dir, env, 40*time.Minute, "go", args...)
}

func run(dir string, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = mergeEnv(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out), nil
}

// mergeEnv is base with each of set's NAME=value replacing NAME, and
// without any *_API_KEY (the programs must run without one).
func mergeEnv(base, set []string) []string {
	drop := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasSuffix(k, "_API_KEY") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, set...)
}

func goEnv(name string) (string, error) {
	out, err := goCmd(".", nil, "env", name)
	return strings.TrimSpace(out), err
}

// rehearsal is make release-check: the modules served by version from a
// file-system module proxy and used by a stranger's modules outside the
// repository.
type rehearsal struct {
	r       *repo
	log     io.Writer
	work    string   // the temporary directory of the run
	env     []string // the stranger's go environment
	fetched map[string]bool
	ran     int

	modcache string          // the machine's module cache
	lists0   string          // the proxy of version lists the registry refuses
	lists    map[string]bool // the modules listed there
}

// rehearse runs the release rehearsal and prints its closing line.
func rehearse(r *repo, log io.Writer, keep bool) (err error) {
	problems, err := check(r)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("the modules disagree with %s:\n  %s", versionsFile, strings.Join(problems, "\n  "))
	}
	work, err := os.MkdirTemp("", "oncely-release-check-")
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(r.Root, work); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("the temporary directory %s is inside the repository: set TMPDIR elsewhere", work)
	}
	if keep {
		fmt.Fprintf(log, "release-check: keeping %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	h := &rehearsal{r: r, log: log, work: work, fetched: map[string]bool{}, lists: map[string]bool{}}
	start := time.Now()

	// The modules, as the proxy would serve their tags.
	proxy := filepath.Join(work, "proxy")
	if err := writeProxy(r, proxy, commitTime(r)); err != nil {
		return err
	}
	machineProxy, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	h.modcache = modcache
	h.lists0 = filepath.Join(work, "lists")
	if err := os.MkdirAll(h.lists0, 0o755); err != nil {
		return err
	}
	h.env = []string{
		// lists0 is empty but where gorelease needs a version list the
		// registry refuses (see gorelease.go).
		"GOPROXY=" + (&url{proxy}).String() + "," + (&url{h.lists0}).String() + "," + machineProxy,
		"GONOSUMDB=" + r.RootPath,  // the checksum database knows nothing of unpublished versions
		"GONOPROXY=", "GOPRIVATE=", // the proxy, not a repository, serves our paths
		"GOWORK=off",
		// The go command indexes a module cache directory once per
		// path@version, taking it to be immutable; a rehearsal serves the
		// same version with new contents each run, so an index left by an
		// earlier run would hand the compiler the old files' imports.
		"GODEBUG=goindex=0",
	}
	// The machine's module cache serves third-party modules; ours must come
	// from the proxy above, never from a copy a previous run left there.
	if err := purgeOurs(modcache, r.RootPath); err != nil {
		return err
	}
	defer func() {
		if perr := purgeOurs(modcache, r.RootPath); perr != nil && err == nil {
			err = perr
		}
	}()
	fmt.Fprintf(log, "release-check: %d modules at %s served from %s (then the machine's GOPROXY); GONOSUMDB=%s, GOWORK=off\n",
		len(r.Modules), r.Modules[0].Version, proxy, r.RootPath)

	if err := os.MkdirAll(filepath.Join(work, "stranger"), 0o755); err != nil {
		return err
	}
	if err := h.quickStart(); err != nil {
		return err
	}
	if err := h.integrations(); err != nil {
		return err
	}
	if err := h.install(); err != nil {
		return err
	}
	if err := h.gorelease(proxy); err != nil {
		return err
	}
	if err := h.distArchive(); err != nil {
		return err
	}
	fmt.Fprintf(log, "release-check: done in %.0fs\n", time.Since(start).Seconds())
	fmt.Fprintf(log, "release-check: %d modules fetched by version, %d programs built and run\n", len(h.fetched), h.ran)
	if len(h.fetched) != len(r.Modules) {
		var missed []string
		for _, m := range r.Modules {
			if !h.fetched[m.Path] {
				missed = append(missed, m.Path)
			}
		}
		return fmt.Errorf("not every listed module was fetched by version: %s", strings.Join(missed, ", "))
	}
	return nil
}

type url struct{ dir string }

// String is the file:// URL of the directory (GOPROXY takes no other form).
func (u *url) String() string { return "file://" + filepath.ToSlash(u.dir) }

// commitTime is HEAD's commit time, the time the proxy gives a tag's version.
func commitTime(r *repo) time.Time {
	out, err := git(r.Root, "log", "-1", "--format=%cI")
	if err == nil {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(out)); err == nil {
			return t
		}
	}
	return time.Now()
}

// purgeOurs removes our modules from the module cache (the extracted
// trees and the downloads), which hold only what a rehearsal put there:
// the workspace builds our modules from the checkout.
func purgeOurs(modcache, rootPath string) error {
	for _, dir := range []string{
		filepath.Join(modcache, filepath.FromSlash(rootPath)) + "@",
		filepath.Join(modcache, filepath.FromSlash(rootPath)),
		filepath.Join(modcache, "cache", "download", filepath.FromSlash(rootPath)),
	} {
		matches, _ := filepath.Glob(dir + "*")
		for _, m := range matches {
			filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					os.Chmod(p, 0o755)
				}
				return nil
			})
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// stranger makes an empty module example.com/stranger/NAME outside the
// repository.
func (h *rehearsal) stranger(name string) (string, error) {
	dir := filepath.Join(h.work, "stranger", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	_, err := goCmd(dir, h.env, "mod", "init", "example.com/stranger/"+name)
	return dir, err
}

// get runs go get of each module at its listed version in dir.
func (h *rehearsal) get(dir string, paths ...string) error {
	args := []string{"get"}
	for _, p := range paths {
		m, _ := h.r.listed(p)
		args = append(args, p+"@"+m.Version)
	}
	if _, err := goCmd(dir, h.env, args...); err != nil {
		return err
	}
	for _, p := range paths {
		h.fetched[p] = true
	}
	return nil
}

// download fetches a module by version and returns its directory in the
// module cache.
func (h *rehearsal) download(p string) (string, error) {
	m, _ := h.r.listed(p)
	out, err := goCmd(filepath.Join(h.work, "stranger"), h.env, "mod", "download", "-json", p+"@"+m.Version)
	if err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %v", p, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", p, info.Error)
	}
	h.fetched[p] = true
	return info.Dir, nil
}

// buildAndRun builds the stranger's module in dir and runs the program in
// an empty directory, returning its output.
func (h *rehearsal) buildAndRun(dir, name string, args ...string) (string, error) {
	if _, err := goCmd(dir, h.env, "mod", "tidy"); err != nil {
		return "", err
	}
	bin := filepath.Join(h.work, "bin", name)
	if _, err := goCmd(dir, h.env, "build", "-o", bin, "."); err != nil {
		return "", err
	}
	out, err := h.runEmpty(name, bin, args...)
	if err == nil {
		h.ran++
	}
	return out, err
}

// runEmpty runs a program in a new empty directory.
func (h *rehearsal) runEmpty(name, bin string, args ...string) (string, error) {
	empty, err := os.MkdirTemp(h.work, "run-"+name+"-")
	if err != nil {
		return "", err
	}
	return run(empty, nil, 5*time.Minute, bin, args...)
}

// quickStart builds and runs the README's Quick start, as the root module
// fetched by version carries it.
func (h *rehearsal) quickStart() error {
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(h.work, "stranger"), 0o755); err != nil {
		return err
	}
	dir, err := h.stranger("quickstart")
	if err != nil {
		return err
	}
	if err := h.get(dir, h.r.RootPath); err != nil {
		return err
	}
	rootDir, err := h.download(h.r.RootPath)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(rootDir, "README.md"))
	if err != nil {
		return err
	}
	block, err := quickStart(string(readme))
	if err != nil {
		return fmt.Errorf("README.md: %w", err)
	}
	pkgs, err := packageNames(rootDir, h.r.RootPath)
	if err != nil {
		return err
	}
	src, err := program(block, pkgs)
	if err != nil {
		return fmt.Errorf("README.md: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	out, err := h.buildAndRun(dir, "quickstart")
	if err != nil {
		return err
	}
	if want, ok := expectedOutput(block); ok && strings.TrimSpace(out) != want {
		return fmt.Errorf("the README's Quick start printed\n%s\nbut its Output comment says\n%s", out, want)
	}
	fmt.Fprintf(h.log, "release-check: README Quick start (%d lines) built and run from %s@%s (%.0fs):\n%s",
		strings.Count(block, "\n"), h.r.RootPath, h.r.Modules[0].Version, time.Since(start).Seconds(), indent(out))
	return nil
}

// packageNames maps each package name of the module in dir (not internal,
// not a command) and of the standard library to its import paths.
func packageNames(dir, modPath string) (map[string][]string, error) {
	names := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if n := d.Name(); rel != "." && (n == "internal" || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(p, 0)
		if err != nil || bp.Name == "main" {
			return nil
		}
		names[bp.Name] = append(names[bp.Name], path.Join(modPath, rel))
		return nil
	})
	if err != nil {
		return nil, err
	}
	out, err := goCmd(".", nil, "list", "-f", "{{.Name}} {{.ImportPath}}", "std")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, p, _ := strings.Cut(line, " ")
		if name == "main" || strings.Contains(p, "internal") || strings.HasPrefix(p, "vendor/") {
			continue
		}
		names[name] = append(names[name], p)
	}
	return names, nil
}

// integrations builds and runs, for each integration module, the example
// program of the example module that requires it, both fetched by
// version: its files are copied into a stranger's module that requires
// the root and the integration by version. An example module that uses no
// integration (the Lambda handler, which needs the Lambda runtime to run)
// is built, not run.
func (h *rehearsal) integrations() error {
	var integrations, examples []module
	for _, m := range h.r.Modules {
		switch {
		case m.Path == h.r.RootPath:
		case strings.HasPrefix(m.Dir, "examples/"):
			examples = append(examples, m)
		default:
			integrations = append(integrations, m)
		}
	}
	uses := map[string][]string{} // example -> the listed modules it requires
	for _, e := range examples {
		f, err := parseMod(h.r, path.Join(e.Dir, "go.mod"))
		if err != nil {
			return err
		}
		for _, req := range f.Require {
			if _, ok := h.r.listed(req.Mod.Path); ok {
				uses[e.Path] = append(uses[e.Path], req.Mod.Path)
			}
		}
	}
	covered := map[string]bool{}
	for _, e := range examples {
		start := time.Now()
		name := path.Base(e.Dir)
		var integ []string
		for _, p := range uses[e.Path] {
			if p != h.r.RootPath {
				integ = append(integ, p)
			}
		}
		src, err := h.download(e.Path)
		if err != nil {
			return err
		}
		dir, err := h.stranger(name)
		if err != nil {
			return err
		}
		if err := copyPackage(src, dir); err != nil {
			return err
		}
		if err := h.get(dir, uses[e.Path]...); err != nil {
			return err
		}
		if len(integ) == 0 {
			if _, err := goCmd(dir, h.env, "mod", "tidy"); err != nil {
				return err
			}
			if _, err := goCmd(dir, h.env, "build", "-o", filepath.Join(h.work, "bin", name), "."); err != nil {
				return err
			}
			fmt.Fprintf(h.log, "release-check: %s built (not run: it uses no integration module and needs its platform's runtime) (%.0fs)\n", e.Path, time.Since(start).Seconds())
			continue
		}
		out, err := h.buildAndRun(dir, name)
		if err != nil {
			return err
		}
		for _, p := range integ {
			covered[p] = true
		}
		fmt.Fprintf(h.log, "release-check: %s's program, on %s, built and run (%.0fs), its last lines:\n%s",
			e.Path, strings.Join(integ, ", "), time.Since(start).Seconds(), indent(lastLines(out, 3)))
	}
	var missing []string
	for _, m := range integrations {
		if !covered[m.Path] {
			missing = append(missing, m.Path)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("no example module runs %s: each integration needs one under examples/", strings.Join(missing, ", "))
	}
	return nil
}

// copyPackage copies the non-test Go files of the package in src (a
// module in the module cache) into dir.
func copyPackage(src, dir string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s holds no Go program", src)
	}
	return nil
}

// install runs go install of the oncely command by version into an empty
// GOBIN, then the installed binary's demo and serve-fakes --help in an
// empty directory.
func (h *rehearsal) install() error {
	start := time.Now()
	gobin := filepath.Join(h.work, "gobin")
	empty := filepath.Join(h.work, "install")
	for _, d := range []string{gobin, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	root := h.r.Modules[0]
	for _, m := range h.r.Modules {
		if m.Path == h.r.RootPath {
			root = m
		}
	}
	if _, err := goCmd(empty, append([]string{"GOBIN=" + gobin}, h.env...), "install", h.r.RootPath+"/cmd/oncely@"+root.Version); err != nil {
		return err
	}
	bin := filepath.Join(gobin, "oncely")
	demo, err := h.runEmpty("oncely-demo", bin, "demo")
	if err != nil {
		return err
	}
	help, err := h.runEmpty("oncely-serve-fakes", bin, "serve-fakes", "--help")
	if err != nil {
		return err
	}
	if !strings.Contains(help, "serve-fakes") {
		return fmt.Errorf("oncely serve-fakes --help printed no usage:\n%s", help)
	}
	h.ran++
	fmt.Fprintf(h.log, "release-check: go install %s/cmd/oncely@%s, then oncely demo and oncely serve-fakes --help in an empty directory (%.0fs); the demo's last lines:\n%s",
		h.r.RootPath, root.Version, time.Since(start).Seconds(), indent(lastLines(demo, 4)))
	return nil
}

// distArchive builds the linux/amd64 archive as make dist does, checks the
// checksums file with sha256sum -c, and runs oncely demo from the
// unpacked archive in an empty directory.
func (h *rehearsal) distArchive() error {
	start := time.Now()
	out := filepath.Join(h.work, "dist")
	names, err := dist(h.r, out, []string{"linux/amd64"}, commitTime(h.r), io.Discard)
	if err != nil {
		return err
	}
	root, _ := h.r.listed(h.r.RootPath)
	sums := checksumsName(root.Version)
	if _, err := verifyChecksums(out, sums); err != nil {
		return err
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		if _, err := run(out, nil, time.Minute, "sha256sum", "-c", sums); err != nil {
			return err
		}
	}
	unpacked, err := os.MkdirTemp(h.work, "unpacked-")
	if err != nil {
		return err
	}
	if err := untar(filepath.Join(out, names[0]), unpacked); err != nil {
		return err
	}
	demo, err := run(unpacked, nil, 5*time.Minute, filepath.Join(unpacked, "oncely"), "demo")
	if err != nil {
		return err
	}
	h.ran++
	fmt.Fprintf(h.log, "release-check: %s (sha256sum -c %s: OK) unpacked into an empty directory, ./oncely demo run (%.0fs); its last line:\n%s",
		names[0], sums, time.Since(start).Seconds(), indent(lastLines(demo, 1)))
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
