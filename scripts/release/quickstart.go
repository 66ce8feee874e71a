package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"sort"
	"strings"
)

// quickStart returns the first ```go block under README's "Quick start"
// heading (any level; the section ends at the next heading of the same or
// a higher level).
func quickStart(readme string) (string, error) {
	level := 0
	var block []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(readme))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if in {
			if strings.TrimSpace(line) == "```" {
				return strings.Join(block, "\n") + "\n", nil
			}
			block = append(block, line)
			continue
		}
		if h := headingLevel(line); h > 0 {
			title := strings.TrimSpace(strings.TrimLeft(line, "#"))
			switch {
			case strings.EqualFold(title, "Quick start"):
				level = h
			case level > 0 && h <= level:
				return "", errors.New(`the README's "Quick start" section has no ` + "```go" + ` block`)
			}
			continue
		}
		if level > 0 && strings.TrimSpace(line) == "```go" {
			in = true
		}
	}
	if in {
		return "", errors.New(`the README's Quick start block is not closed`)
	}
	if level == 0 {
		return "", errors.New(`the README has no "Quick start" heading`)
	}
	return "", errors.New(`the README's "Quick start" section has no ` + "```go" + ` block`)
}

func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) || line[n] != ' ' {
		return 0
	}
	return n
}

// expectedOutput is the text of the block's "// Output:" comment, as in a
// Go example ("" when it has none).
func expectedOutput(block string) (string, bool) {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "// Output:" {
			continue
		}
		var want []string
		for _, o := range lines[i+1:] {
			o = strings.TrimSpace(o)
			if !strings.HasPrefix(o, "//") {
				break
			}
			want = append(want, strings.TrimPrefix(strings.TrimPrefix(o, "//"), " "))
		}
		return strings.TrimSpace(strings.Join(want, "\n")), true
	}
	return "", false
}

// program makes a main package of a README block: a whole file (it has a
// package clause) as it is, or a function body (an Example's, as the
// README quotes them) as main's body, importing each package it names
// that it does not declare. pkgs maps a package name to its import path
// (the module's packages and the standard library's); a name that no
// package or several packages have is an error.
func program(block string, pkgs map[string][]string) (string, error) {
	if strings.HasPrefix(strings.TrimSpace(block), "package ") || strings.Contains(block, "\npackage ") {
		return block, nil
	}
	body := "package main\n\nfunc main() {\n" + block + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", body, parser.ParseComments)
	if err != nil {
		return "", fmt.Errorf("the Quick start does not parse as a function body: %w", err)
	}
	undefined := map[string]bool{}
	conf := types.Config{Error: func(err error) {
		var te types.Error
		if errors.As(err, &te) {
			if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok {
				undefined[name] = true
			}
		}
	}}
	conf.Check("main", fset, []*ast.File{f}, nil)
	var names []string
	for name := range undefined {
		names = append(names, name)
	}
	sort.Strings(names)
	var imports []string
	for _, name := range names {
		paths := pkgs[name]
		switch len(paths) {
		case 0:
			return "", fmt.Errorf("the Quick start uses %s, which no package of the module or the standard library is named", name)
		case 1:
			imports = append(imports, paths[0])
		default:
			return "", fmt.Errorf("the Quick start uses %s, which names several packages (%s): make it a whole file with its imports", name, strings.Join(paths, ", "))
		}
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&src, "\t%q\n", p)
	}
	src.WriteString(")\n\nfunc main() {\n" + block + "}\n")
	out, err := format.Source([]byte(src.String()))
	if err != nil {
		return "", err
	}
	return string(out), nil
}
