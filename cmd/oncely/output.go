package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
)

// colours is how a command colours its output: only on a terminal, and
// never when NO_COLOR is set (https://no-color.org).
type colours struct{ on bool }

func coloursFor(w io.Writer) colours {
	f, ok := w.(*os.File)
	return colours{on: ok && colourAllowed(isatty.IsTerminal(f.Fd()))}
}

// colourAllowed reports whether output to a terminal (tty) may be
// coloured.
func colourAllowed(tty bool) bool {
	return tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// ANSI colour codes.
const (
	red    = "31"
	green  = "32"
	yellow = "33"
	cyan   = "36"
	bold   = "1"
)

func (c colours) paint(code, s string) string {
	if !c.on || code == "" || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// stateColour is the colour of a record state.
func stateColour(state string) string {
	switch state {
	case "done":
		return green
	case "failed":
		return red
	case "uncertain":
		return yellow
	case "pending":
		return cyan
	}
	return ""
}

// table is an aligned table whose cells may be coloured: widths are
// measured on the plain text, so colour never breaks the alignment.
type table struct {
	header []string
	rows   [][]cell
}

// cell is one table cell and its colour ("" for none).
type cell struct {
	text, colour string
}

func newTable(header ...string) *table { return &table{header: header} }

// row adds a row of plain cells.
func (t *table) row(cells ...string) {
	r := make([]cell, len(cells))
	for i, s := range cells {
		r[i] = cell{text: s}
	}
	t.rows = append(t.rows, r)
}

// rowCells adds a row of cells.
func (t *table) rowCells(cells ...cell) { t.rows = append(t.rows, cells) }

// write prints the table with two spaces between columns.
func (t *table) write(w io.Writer, c colours) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, cl := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(cl.text))
		}
	}
	line := func(cells []cell) {
		var b strings.Builder
		for i, cl := range cells {
			pad := ""
			if i < len(cells)-1 {
				pad = strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cl.text)+2)
			}
			b.WriteString(c.paint(cl.colour, cl.text) + pad)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	head := make([]cell, len(t.header))
	for i, h := range t.header {
		head[i] = cell{text: h, colour: bold}
	}
	line(head)
	for _, r := range t.rows {
		line(r)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// when shows a time in local time and relative to now.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST") + " (" + relative(t, now) + ")"
}

// relative is "5m ago" or "in 2h".
func relative(t, now time.Time) string {
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}
