package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// versionsFile is the list of the repository's modules and their versions,
// at the repository's root.
const versionsFile = "versions.yaml"

// versions is versions.yaml: OpenTelemetry Go's layout (module sets, each
// with one version, and the modules never released).
type versions struct {
	ModuleSets map[string]moduleSet `yaml:"module-sets"`
	Excluded   []string             `yaml:"excluded-modules"`
}

type moduleSet struct {
	Version string   `yaml:"version"`
	Modules []string `yaml:"modules"`
}

// module is one released module of the repository.
type module struct {
	Path    string // the module path
	Dir     string // its directory, relative to the repository's root, slash-separated ("." for the root)
	Version string // the version versions.yaml releases it at
	Set     string // its module set
}

// TagPrefix is the prefix of the module's tags: "" for the root module,
// "agent/oncelyopenai/" for a module in that directory.
func (m module) TagPrefix() string {
	if m.Dir == "." {
		return ""
	}
	return m.Dir + "/"
}

// Tag is the git tag of the module's version.
func (m module) Tag() string { return m.TagPrefix() + m.Version }

// repo is a checkout: versions.yaml's modules found on disk.
type repo struct {
	Root     string            // the repository's root directory
	RootPath string            // the root module's path
	Modules  []module          // the listed modules, by path
	Excluded map[string]string // an excluded module's path -> its directory
	byPath   map[string]module // the listed modules
	gomods   map[string]string // every go.mod's module path -> its directory
	works    []string          // the go.work files, relative slash paths
}

// listed reports the module versions.yaml lists at path.
func (r *repo) listed(path string) (module, bool) {
	m, ok := r.byPath[path]
	return m, ok
}

// ours reports whether a module path is under the root module's path.
func (r *repo) ours(p string) bool {
	return p == r.RootPath || strings.HasPrefix(p, r.RootPath+"/")
}

// loadRepo reads versions.yaml at root and finds every go.mod and go.work
// file of the checkout. It fails when the file is malformed, lists a
// module twice or one that has no go.mod, or when a go.mod is neither
// listed nor excluded.
func loadRepo(root string) (*repo, error) {
	data, err := os.ReadFile(filepath.Join(root, versionsFile))
	if err != nil {
		return nil, err
	}
	var v versions
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", versionsFile, err)
	}
	if len(v.ModuleSets) == 0 {
		return nil, fmt.Errorf("%s: no module-sets", versionsFile)
	}
	r := &repo{Root: root, Excluded: map[string]string{}, byPath: map[string]module{}, gomods: map[string]string{}}
	if err := r.walk(); err != nil {
		return nil, err
	}
	var problems []string
	for name, set := range v.ModuleSets {
		if !semver.IsValid(set.Version) || semver.Canonical(set.Version) != set.Version || semver.Build(set.Version) != "" {
			problems = append(problems, fmt.Sprintf("module set %s: version %q is not a canonical semantic version (vX.Y.Z)", name, set.Version))
		}
		for _, p := range set.Modules {
			if prev, dup := r.byPath[p]; dup {
				problems = append(problems, fmt.Sprintf("%s is listed twice (module sets %s and %s)", p, prev.Set, name))
				continue
			}
			dir, ok := r.gomods[p]
			if !ok {
				problems = append(problems, fmt.Sprintf("module set %s lists %s, but no go.mod of the repository declares it", name, p))
				continue
			}
			r.byPath[p] = module{Path: p, Dir: dir, Version: set.Version, Set: name}
		}
	}
	for _, p := range v.Excluded {
		if _, dup := r.byPath[p]; dup {
			problems = append(problems, fmt.Sprintf("%s is both listed and excluded", p))
			continue
		}
		dir, ok := r.gomods[p]
		if !ok {
			problems = append(problems, fmt.Sprintf("excluded-modules lists %s, but no go.mod of the repository declares it", p))
			continue
		}
		r.Excluded[p] = dir
	}
	for p, dir := range r.gomods {
		if dir == "." {
			r.RootPath = p
		}
		if _, ok := r.byPath[p]; !ok {
			if _, ok := r.Excluded[p]; !ok {
				problems = append(problems, fmt.Sprintf("%s/go.mod (%s) is neither in a module set nor in excluded-modules", dir, p))
			}
		}
	}
	if r.RootPath == "" {
		problems = append(problems, "no go.mod at the repository's root")
	} else if _, ok := r.byPath[r.RootPath]; !ok {
		problems = append(problems, fmt.Sprintf("the root module %s is not in a module set", r.RootPath))
	}
	for _, m := range r.byPath {
		// A nested module's tag is its directory plus the version, which
		// the go command finds only when the path ends in that directory.
		if m.Dir != "." && r.RootPath != "" && m.Path != r.RootPath+"/"+m.Dir {
			problems = append(problems, fmt.Sprintf("%s lives in %s: its path must be %s/%s for its tag %s to resolve", m.Path, m.Dir, r.RootPath, m.Dir, m.Tag()))
		}
		r.Modules = append(r.Modules, m)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("%s:\n  %s", versionsFile, strings.Join(problems, "\n  "))
	}
	sort.Slice(r.Modules, func(i, j int) bool { return r.Modules[i].Path < r.Modules[j].Path })
	return r, nil
}

// walk finds the go.mod and go.work files, skipping what the go command
// skips (testdata, directories starting with . or _) and node_modules.
func (r *repo) walk() error {
	return filepath.WalkDir(r.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.Root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch d.Name() {
		case "go.mod":
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mp := modfile.ModulePath(data)
			if mp == "" {
				return fmt.Errorf("%s: no module line", rel)
			}
			dir := path.Dir(rel)
			if prev, dup := r.gomods[mp]; dup {
				return fmt.Errorf("%s/go.mod and %s/go.mod both declare %s", prev, dir, mp)
			}
			r.gomods[mp] = dir
		case "go.work":
			r.works = append(r.works, rel)
		}
		return nil
	})
}
