package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	modv "golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// gorelease is the pinned gorelease (golang.org/x/exp/cmd/gorelease), the
// same x/exp version as scripts/apicheck's apidiff.
const gorelease = "golang.org/x/exp/cmd/gorelease@v0.0.0-20261113113407-e3970619a1a4"

// gorelease runs gorelease on each module as the proxy serves it (its zip,
// unpacked), in first-release mode: -base=none, since no version of any
// module has been released. A nested module's go.sum cannot hold the sums
// of our modules at the version being released until they are tagged, so
// the unpacked copy gets those sums (from the rehearsal's proxy) and
// nothing else; gorelease must then find nothing.
func (h *rehearsal) gorelease(proxy string) error {
	start := time.Now()
	gobin := filepath.Join(h.work, "tools")
	if _, err := goCmd(h.work, append([]string{"GOBIN=" + gobin}, h.env...), "install", gorelease); err != nil {
		return err
	}
	for _, m := range h.r.Modules {
		esc, err := modv.EscapePath(m.Path)
		if err != nil {
			return err
		}
		dir := filepath.Join(h.work, "gorelease", filepath.FromSlash(m.Dir))
		zip := filepath.Join(proxy, filepath.FromSlash(esc), "@v", m.Version+".zip")
		if err := modzip.Unzip(dir, modv.Version{Path: m.Path, Version: m.Version}, zip); err != nil {
			return err
		}
		if err := h.addOurSums(dir); err != nil {
			return err
		}
		var out string
		for {
			out, err = run(dir, h.env, 40*time.Minute, filepath.Join(gobin, "gorelease"), "-base=none", "-version="+m.Version)
			if err == nil {
				break
			}
			// gorelease reads the version list of every module of the build
			// (go list -m -u all) for retractions. Where the registry refuses
			// a list, it reads one made of the versions the machine's module
			// cache holds, and says so.
			refused := refusedList.FindStringSubmatch(err.Error())
			if refused == nil || h.lists[refused[1]] {
				return fmt.Errorf("gorelease of %s: %w", m.Path, err)
			}
			versions, lerr := h.listFromCache(refused[1])
			if lerr != nil {
				return fmt.Errorf("gorelease of %s: %w (and no list in the module cache: %v)", m.Path, err, lerr)
			}
			fmt.Fprintf(h.log, "release-check: gorelease: the registry refuses the version list of %s; its retractions are read from the versions the module cache holds (%s)\n", refused[1], versions)
		}
		summary := strings.TrimSpace(lastLines(out, 1))
		fmt.Fprintf(h.log, "release-check: gorelease -base=none -version=%s %s: %s\n", m.Version, m.Path, summary)
	}
	fmt.Fprintf(h.log, "release-check: gorelease clean for %d modules (%.0fs)\n", len(h.r.Modules), time.Since(start).Seconds())
	return nil
}

// refusedList matches the go command's error for a version list the
// registry refused.
var refusedList = regexp.MustCompile(`loading module retractions for ([^@\s]+)@\S+: reading \S+/@v/list: 403`)

// listFromCache writes, into the proxy directory that the gorelease runs
// read after ours, the version list of a module as the versions of it
// that the machine's module cache holds.
func (h *rehearsal) listFromCache(p string) (string, error) {
	esc, err := modv.EscapePath(p)
	if err != nil {
		return "", err
	}
	infos, err := filepath.Glob(filepath.Join(h.modcache, "cache", "download", filepath.FromSlash(esc), "@v", "*.info"))
	if err != nil || len(infos) == 0 {
		return "", fmt.Errorf("no version of %s in the module cache", p)
	}
	var versions []string
	for _, info := range infos {
		versions = append(versions, strings.TrimSuffix(filepath.Base(info), ".info"))
	}
	dir := filepath.Join(h.lists0, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	h.lists[p] = true
	return strings.Join(versions, " "), nil
}

// addOurSums adds to dir's go.sum the sums of the listed modules its go.mod
// requires, as the rehearsal's proxy serves them.
func (h *rehearsal) addOurSums(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	f, err := modfile.Parse(path.Join(dir, "go.mod"), data, nil)
	if err != nil {
		return err
	}
	var lines []string
	for _, req := range f.Require {
		if _, ok := h.r.listed(req.Mod.Path); !ok {
			continue
		}
		out, err := goCmd(h.work, h.env, "mod", "download", "-json", req.Mod.Path+"@"+req.Mod.Version)
		if err != nil {
			return err
		}
		var info struct{ Sum, GoModSum string }
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n", req.Mod.Path, req.Mod.Version, info.Sum, req.Mod.Path, req.Mod.Version, info.GoModSum))
	}
	if len(lines) == 0 {
		return nil
	}
	sum, err := os.OpenFile(filepath.Join(dir, "go.sum"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer sum.Close()
	_, err = sum.WriteString(strings.Join(lines, ""))
	return err
}
