package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// distTargets are the platforms make dist builds the oncely command for.
var distTargets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// distDocs are the files every archive carries beside the binary.
var distDocs = []string{"LICENSE", "README.md", "CHANGELOG.md"}

// archiveName is the archive of one platform: oncely_0.2.0_linux_amd64.tar.gz
// (a zip for Windows), GoReleaser's default naming.
func archiveName(version, goos, goarch string) string {
	ext := ".tar.gz"
	if goos == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("oncely_%s_%s_%s%s", strings.TrimPrefix(version, "v"), goos, goarch, ext)
}

// checksumsName is the checksums file of a version's archives.
func checksumsName(version string) string {
	return fmt.Sprintf("oncely_%s_checksums.txt", strings.TrimPrefix(version, "v"))
}

// dist builds the oncely command of the root module for each target
// (CGO_ENABLED=0, -trimpath, GOWORK=off: the root module's go.mod alone,
// as go install builds it), archives each with distDocs, and writes the
// checksums file (sha256sum's format). stamp is every archived file's time,
// so that the same tree gives the same archives.
func dist(r *repo, outDir string, targets []string, stamp time.Time, log io.Writer) ([]string, error) {
	root, ok := r.listed(r.RootPath)
	if !ok {
		return nil, fmt.Errorf("no root module")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	build, err := os.MkdirTemp("", "oncely-dist-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(build)
	var names []string
	for _, t := range targets {
		goos, goarch, ok := strings.Cut(t, "/")
		if !ok {
			return nil, fmt.Errorf("target %q: want os/arch", t)
		}
		bin := "oncely"
		if goos == "windows" {
			bin += ".exe"
		}
		exe := filepath.Join(build, goos+"_"+goarch, bin)
		start := time.Now()
		if _, err := goCmd(r.Root, []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch, "GOWORK=off"},
			"build", "-trimpath", "-ldflags=-s -w", "-o", exe, "./cmd/oncely"); err != nil {
			return nil, err
		}
		files := []archived{{name: bin, file: exe, mode: 0o755}}
		for _, d := range distDocs {
			files = append(files, archived{name: d, file: filepath.Join(r.Root, d), mode: 0o644})
		}
		name := archiveName(root.Version, goos, goarch)
		if err := writeArchive(filepath.Join(outDir, name), files, stamp); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "dist: %s (built in %.0fs)\n", name, time.Since(start).Seconds())
		names = append(names, name)
	}
	if err := writeChecksums(outDir, checksumsName(root.Version), names); err != nil {
		return nil, err
	}
	return names, nil
}

type archived struct {
	name string // the name in the archive
	file string // the file on disk
	mode int64
}

// writeArchive writes a .tar.gz or a .zip (by the name's extension) of
// files, each with time stamp.
func writeArchive(name string, files []archived, stamp time.Time) error {
	var buf bytes.Buffer
	if strings.HasSuffix(name, ".zip") {
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			data, err := os.ReadFile(f.file)
			if err != nil {
				return err
			}
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: stamp.UTC()}
			h.SetMode(os.FileMode(f.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
	} else {
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, f := range files {
			data, err := os.ReadFile(f.file)
			if err != nil {
				return err
			}
			h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(data)), ModTime: stamp.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
	}
	return os.WriteFile(name, buf.Bytes(), 0o644)
}

// writeChecksums writes "<sha256>  <name>" lines, sorted by name, which
// sha256sum -c reads.
func writeChecksums(dir, name string, files []string) error {
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	var b strings.Builder
	for _, f := range sorted {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

// verifyChecksums checks every line of a checksums file against the files
// beside it, as sha256sum -c does.
func verifyChecksums(dir, name string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		want, file, ok := strings.Cut(line, "  ")
		if !ok {
			return n, fmt.Errorf("%s: malformed line %q", name, line)
		}
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return n, err
		}
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != want {
			return n, fmt.Errorf("%s: %s: checksum mismatch", name, file)
		}
		n++
	}
	return n, nil
}

// untar unpacks a .tar.gz into dir.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "..") || strings.Contains(h.Name, "/") {
			return fmt.Errorf("%s: unexpected entry %q", archive, h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, h.Name), data, os.FileMode(h.Mode)); err != nil {
			return err
		}
	}
}
