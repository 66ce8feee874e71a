package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	modv "golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// treeFile is one file of the working tree, as a file of a module zip.
type treeFile struct {
	rel  string // its path within the module
	file string // its path on disk
	info os.FileInfo
}

func (f treeFile) Path() string                 { return f.rel }
func (f treeFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.file) }

// moduleFiles lists the files a commit of the working tree would hold
// under the module's directory: git's tracked files and the untracked
// ones it does not ignore, as they are on disk (the module proxy serves a
// tag's tree; this is that tree had the working tree been committed).
// Files of nested modules are left in: modzip.Create omits them, as the
// proxy does.
func moduleFiles(r *repo, m module) ([]modzip.File, error) {
	out, err := git(r.Root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", m.Dir)
	if err != nil {
		return nil, err
	}
	var files []modzip.File
	seen := map[string]bool{}
	for _, name := range strings.Split(out, "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		file := filepath.Join(r.Root, filepath.FromSlash(name))
		info, err := os.Lstat(file)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		rel := name
		if m.Dir != "." {
			rel = strings.TrimPrefix(name, m.Dir+"/")
		}
		files = append(files, treeFile{rel: rel, file: file, info: info})
	}
	return files, nil
}

// writeProxy writes every listed module at its listed version into dir in
// the module proxy's layout (the GOPROXY protocol, which file:// URLs
// serve): <path>/@v/list, <version>.info, <version>.mod and <version>.zip,
// the zip made by golang.org/x/mod/zip as the proxy makes it. stamp is the
// .info's time (the proxy gives the commit's).
func writeProxy(r *repo, dir string, stamp time.Time) error {
	for _, m := range r.Modules {
		esc, err := modv.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		files, err := moduleFiles(r, m)
		if err != nil {
			return err
		}
		var zip bytes.Buffer
		if err := modzip.Create(&zip, modv.Version{Path: m.Path, Version: m.Version}, files); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		gomod, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(path.Join(m.Dir, "go.mod"))))
		if err != nil {
			return err
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{m.Version, stamp.UTC()})
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			"list":              []byte(m.Version + "\n"),
			m.Version + ".info": info,
			m.Version + ".mod":  gomod,
			m.Version + ".zip":  zip.Bytes(),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
