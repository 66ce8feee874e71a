package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// git runs git in dir and returns its standard output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// tag creates the tag of every listed module at HEAD (v0.2.0,
// agent/oncelyopenai/v0.2.0, ...). It refuses, creating none, when the
// check finds a problem, when the working tree has uncommitted changes
// (the tags would name a commit other than the one checked) or when any of
// the tags exists. With dryRun it prints the tags and creates none.
func tag(r *repo, out io.Writer, dryRun bool) error {
	problems, err := check(r)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("refusing to tag: the modules disagree with %s:\n  %s", versionsFile, strings.Join(problems, "\n  "))
	}
	status, err := git(r.Root, "status", "--porcelain")
	if err != nil {
		return err
	}
	if strings.TrimSpace(status) != "" {
		return fmt.Errorf("refusing to tag: the working tree has uncommitted changes:\n%s", status)
	}
	existing, err := git(r.Root, "tag", "--list")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, t := range strings.Fields(existing) {
		have[t] = true
	}
	var clash []string
	for _, m := range r.Modules {
		if have[m.Tag()] {
			clash = append(clash, m.Tag())
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("refusing to tag: %s already exist(s); a published version never changes", strings.Join(clash, ", "))
	}
	head, err := git(r.Root, "rev-parse", "--short", "HEAD")
	if err != nil {
		return err
	}
	for _, m := range r.Modules {
		if dryRun {
			fmt.Fprintf(out, "would tag %s (%s) at %s\n", m.Tag(), m.Path, strings.TrimSpace(head))
			continue
		}
		if _, err := git(r.Root, "tag", "-a", m.Tag(), "-m", fmt.Sprintf("%s %s (module set %s)", m.Path, m.Version, m.Set)); err != nil {
			return err
		}
		fmt.Fprintf(out, "tagged %s (%s) at %s\n", m.Tag(), m.Path, strings.TrimSpace(head))
	}
	if !dryRun {
		fmt.Fprintf(out, "push them with: git push origin %s\n", strings.Join(tagNames(r), " "))
	}
	return nil
}

func tagNames(r *repo) []string {
	var names []string
	for _, m := range r.Modules {
		names = append(names, m.Tag())
	}
	return names
}

// sync rewrites each listed go.mod's requirements on listed modules to
// their listed version and drops its replaces of our modules, and sets
// the version of every replace of a listed module in the go.work files.
// It prints each file it changed.
func sync(r *repo, out io.Writer) error {
	for _, m := range r.Modules {
		name := path.Join(m.Dir, "go.mod")
		f, err := parseMod(r, name)
		if err != nil {
			return err
		}
		changed := false
		for _, req := range f.Require {
			if dep, ok := r.listed(req.Mod.Path); ok && req.Mod.Version != dep.Version {
				if err := f.AddRequire(dep.Path, dep.Version); err != nil {
					return err
				}
				changed = true
			}
		}
		for _, rep := range append([]*modfile.Replace(nil), f.Replace...) {
			if r.ours(rep.Old.Path) {
				if err := f.DropReplace(rep.Old.Path, rep.Old.Version); err != nil {
					return err
				}
				changed = true
			}
		}
		if !changed {
			continue
		}
		f.Cleanup()
		data, err := f.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.Root, filepath.FromSlash(name)), data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "sync: %s\n", name)
	}
	for _, name := range r.works {
		file := filepath.Join(r.Root, filepath.FromSlash(name))
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		w, err := modfile.ParseWork(name, data, nil)
		if err != nil {
			return err
		}
		changed := false
		for _, rep := range w.Replace {
			m, ok := r.listed(rep.Old.Path)
			if !ok || rep.Old.Version == m.Version {
				continue
			}
			// The line's tokens are [replace] old [version] => new [version].
			tok := rep.Syntax.Token
			start := 0
			if len(tok) > 0 && tok[0] == "replace" {
				start = 1
			}
			arrow := start
			for arrow < len(tok) && tok[arrow] != "=>" {
				arrow++
			}
			if arrow == len(tok) {
				return fmt.Errorf("%s:%d: cannot read the replace", name, rep.Syntax.Start.Line)
			}
			rep.Syntax.Token = append(append(append([]string{}, tok[:start]...), tok[start], m.Version), tok[arrow:]...)
			changed = true
		}
		if !changed {
			continue
		}
		if err := os.WriteFile(file, modfile.Format(w.Syntax), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "sync: %s\n", name)
	}
	return nil
}
