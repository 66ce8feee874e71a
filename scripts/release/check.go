package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
)

// check reports every way the checkout disagrees with versions.yaml, one
// line each; none means the modules can be tagged:
//
//   - a listed module's go.mod holds a replace (it would be published: a
//     user's build ignores it, so it can only hide a requirement that does
//     not resolve);
//   - a listed module requires one of the repository's modules that is not
//     listed, or requires a listed one at a version other than its listed
//     version (a version that is not being released);
//   - a go.work uses a module that is not listed, or its replace block
//     names one of our modules at another version, or points elsewhere
//     than that module's directory, or lacks the replace of a module its
//     modules require;
//   - a listed module is used by no go.work (nothing builds or tests it).
func check(r *repo) ([]string, error) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	files := map[string]*modfile.File{}
	for _, m := range r.Modules {
		name := path.Join(m.Dir, "go.mod")
		f, err := parseMod(r, name)
		if err != nil {
			return nil, err
		}
		files[m.Path] = f
		for _, rep := range f.Replace {
			add("%s: replace %s: a go.mod users fetch must not replace (replaces belong in go.work)", name, fmtReplace(rep))
		}
		for _, req := range f.Require {
			if !r.ours(req.Mod.Path) {
				continue
			}
			dep, ok := r.listed(req.Mod.Path)
			switch {
			case !ok:
				add("%s: requires %s %s, which versions.yaml does not release", name, req.Mod.Path, req.Mod.Version)
			case req.Mod.Version != dep.Version:
				add("%s: requires %s %s, but versions.yaml releases it at %s", name, req.Mod.Path, req.Mod.Version, dep.Version)
			}
		}
	}
	used := map[string]bool{}
	for _, name := range r.works {
		data, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		w, err := modfile.ParseWork(name, data, nil)
		if err != nil {
			return nil, err
		}
		wdir := path.Dir(name)
		inWork := map[string]bool{}
		for _, u := range w.Use {
			dir := path.Clean(path.Join(wdir, filepath.ToSlash(u.Path)))
			p, ok := pathOfDir(r, dir)
			if !ok {
				add("%s: use %s: no module of versions.yaml lives there", name, u.Path)
				continue
			}
			inWork[p] = true
			used[p] = true
		}
		replaced := map[string]bool{}
		for _, rep := range w.Replace {
			m, ok := r.listed(rep.Old.Path)
			if !ok {
				if r.ours(rep.Old.Path) {
					add("%s: replace %s: versions.yaml does not release %s", name, fmtReplace(rep), rep.Old.Path)
				}
				continue
			}
			replaced[m.Path] = true
			if rep.Old.Version != m.Version {
				if rep.Old.Version == "" {
					add("%s: replace %s: write the version versions.yaml releases (%s %s => ...)", name, fmtReplace(rep), m.Path, m.Version)
				} else {
					add("%s: replace %s: versions.yaml releases %s at %s", name, fmtReplace(rep), m.Path, m.Version)
				}
			}
			if rep.New.Version != "" || path.Clean(path.Join(wdir, filepath.ToSlash(rep.New.Path))) != m.Dir {
				add("%s: replace %s: must point at %s's directory", name, fmtReplace(rep), m.Path)
			}
			if !inWork[m.Path] {
				add("%s: replace %s: the module is not in the use list", name, fmtReplace(rep))
			}
		}
		var missing []string
		for p := range inWork {
			for _, req := range files[p].Require {
				if _, ok := r.listed(req.Mod.Path); ok && !replaced[req.Mod.Path] {
					missing = append(missing, fmt.Sprintf("%s: %s requires %s %s: add it to the use list and the replace block", name, p, req.Mod.Path, req.Mod.Version))
					replaced[req.Mod.Path] = true // once per workspace
				}
			}
		}
		sort.Strings(missing)
		problems = append(problems, missing...)
	}
	for _, m := range r.Modules {
		if !used[m.Path] {
			add("%s (%s) is in no go.work's use list: nothing builds or tests it", m.Path, m.Dir)
		}
	}
	sort.Strings(problems)
	return problems, nil
}

func parseMod(r *repo, name string) (*modfile.File, error) {
	data, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	return modfile.Parse(name, data, nil)
}

// pathOfDir is the path of the listed module in dir.
func pathOfDir(r *repo, dir string) (string, bool) {
	for _, m := range r.Modules {
		if m.Dir == dir {
			return m.Path, true
		}
	}
	return "", false
}

func fmtReplace(rep *modfile.Replace) string {
	s := rep.Old.Path
	if rep.Old.Version != "" {
		s += " " + rep.Old.Version
	}
	s += " => " + rep.New.Path
	if rep.New.Version != "" {
		s += " " + rep.New.Version
	}
	return s
}
