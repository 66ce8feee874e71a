// Command release checks, tags and rehearses a release of the
// repository's modules, which versions.yaml lists with their version
// (OpenTelemetry Go's layout: module sets and excluded modules).
//
//	go run ./scripts/release check      the go.mod and go.work files agree with versions.yaml
//	go run ./scripts/release sync       rewrite requirements and go.work replaces to the listed versions
//	go run ./scripts/release tag [-n]   tag every module at HEAD (v0.2.0, agent/oncelyopenai/v0.2.0, ...)
//	go run ./scripts/release rehearse   make release-check: a stranger fetches every module by version
//	go run ./scripts/release dist [-out DIR] [-targets os/arch,...]
//	                                    make dist: the oncely command's archives and checksums
//
// check fails on a replace in a go.mod users fetch, on a requirement on
// one of our modules at a version that is not being released, and on a
// go.work whose use list or versioned replace block disagrees with the
// list; tag refuses when check fails, when the working tree is not
// committed or when a tag exists. rehearse serves each module's zip (made
// by golang.org/x/mod/zip, as the module proxy makes it) from a
// file-system GOPROXY in front of the machine's own, with the checksum
// database off for our paths only and GOWORK=off, and in a temporary
// directory outside the repository builds and runs the README's Quick
// start and each integration's example program from modules that require
// them by version, go installs the oncely command by version and runs it,
// and checks the linux/amd64 archive of make dist. It prints
// "release-check: N modules fetched by version, N programs built and run".
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	root := flag.String("C", ".", "the repository's root")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: release [-C dir] check | sync | tag [-n] | rehearse [-keep] | dist [-out DIR] [-targets os/arch,...]")
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := runCommand(*root, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func runCommand(root, cmd string, args []string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	r, err := loadRepo(abs)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	switch cmd {
	case "check":
		fs.Parse(args)
		problems, err := check(r)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("the modules disagree with %s:\n  %s", versionsFile, strings.Join(problems, "\n  "))
		}
		fmt.Printf("release check: %d modules agree with %s (%s)\n", len(r.Modules), versionsFile, setsSummary(r))
		return nil
	case "sync":
		fs.Parse(args)
		return sync(r, os.Stdout)
	case "tag":
		dry := fs.Bool("n", false, "print the tags, create none")
		fs.Parse(args)
		return tag(r, os.Stdout, *dry)
	case "rehearse":
		keep := fs.Bool("keep", false, "keep the temporary directory")
		fs.Parse(args)
		return rehearse(r, os.Stdout, *keep)
	case "dist":
		out := fs.String("out", filepath.Join(abs, ".tmp", "dist"), "the directory of the archives")
		targets := fs.String("targets", strings.Join(distTargets, ","), "os/arch pairs")
		fs.Parse(args)
		names, err := dist(r, *out, strings.Split(*targets, ","), commitTime(r), os.Stdout)
		if err != nil {
			return err
		}
		root, _ := r.listed(r.RootPath)
		fmt.Printf("dist: %d archives and %s in %s\n", len(names), checksumsName(root.Version), *out)
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func setsSummary(r *repo) string {
	sets := map[string]string{}
	var order []string
	for _, m := range r.Modules {
		if _, ok := sets[m.Set]; !ok {
			order = append(order, m.Set)
		}
		sets[m.Set] = m.Version
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, s+" "+sets[s])
	}
	return strings.Join(parts, ", ")
}
