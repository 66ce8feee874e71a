package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

var funcs = template.FuncMap{
	"short": shortKey,
	"path":  pathKey,
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"rel":      relative,
	"dur":      func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"pct":      func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"chart":    chart,
	"outcomes": func() []outcome { return outcomes },
	"ranges":   func() []overviewRange { return ranges },
	"count":    func(m map[outcome]int, o outcome) int { return m[o] },
	"colour":   colour,
	"after":    func(a, b time.Time) bool { return a.After(b) },
	"dict":     func(rows []row, now time.Time) rowsView { return rowsView{Rows: rows, Now: now} },
	"states":   func() []string { return []string{"pending", "done", "failed", "uncertain"} },
	"clip":     clipName,
	"msUntil":  func(t, now time.Time) int64 { return max(0, t.Sub(now).Milliseconds()) },
}

// clipName shortens a name (a tool, a run) to what a table cell or a
// menu shows, at a rune boundary, with an ellipsis; the templates give
// the full name in a title.
func clipName(s string) string {
	const most = 48
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	return string([]rune(s)[:most-1]) + "…"
}

// rowsView is what the rows template receives.
type rowsView struct {
	Rows []row
	Now  time.Time
}

// relative says how far t is from now: "3m ago", "in 20s".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
		return "in " + human(d)
	}
	return human(d) + suffix
}

func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// colour is the fill of an outcome in the chart and the legend.
func colour(o outcome) string {
	switch o {
	case outDone:
		return "#2e7d32"
	case outFailed:
		return "#c62828"
	case outUncertain:
		return "#ef6c00"
	case outPending:
		return "#1565c0"
	case outResolved:
		return "#6a1b9a"
	}
	return "#777"
}

// chart draws the overview's buckets as stacked bars of the four states,
// with a line for the records resolved by hand, as inline SVG.
func chart(ov *overview) template.HTML {
	const w, h, left, bottom, top = 900.0, 240.0, 44.0, 28.0, 10.0
	peak := 1
	for _, b := range ov.Buckets {
		peak = max(peak, b.Counts[outDone]+b.Counts[outFailed]+b.Counts[outUncertain]+b.Counts[outPending])
	}
	scale := niceCeil(peak)
	n := float64(len(ov.Buckets))
	slot := (w - left) / n
	y := func(v float64) float64 { return h - bottom - v/float64(scale)*(h-bottom-top) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="actions per outcome over time">`, w, h)
	ticks := min(4, scale) // whole numbers only
	for i := 0; i <= ticks; i++ {
		v := float64(scale) * float64(i) / float64(ticks)
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" class="grid"/><text x="%.0f" y="%.1f" class="axis" text-anchor="end">%d</text>`,
			left, w, y(v), y(v), left-6, y(v)+4, int(v))
	}
	for i, b := range ov.Buckets {
		x := left + float64(i)*slot + slot*0.1
		base := 0.0
		for _, o := range []outcome{outDone, outFailed, outUncertain, outPending} {
			v := float64(b.Counts[o])
			if v == 0 {
				continue
			}
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d%s</title></rect>`,
				x, y(base+v), slot*0.8, y(base)-y(base+v), colour(o), b.From.UTC().Format("Jan 2 15:04"), o, b.Counts[o], capMark(b.Capped))
			base += v
		}
		if r := b.Counts[outResolved]; r > 0 {
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>resolved by hand: %d</title></circle>`,
				x+slot*0.4, y(float64(r)), colour(outResolved), r)
		}
		if every := max(1, len(ov.Buckets)/6); i%every == 0 {
			fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" class="axis">%s</text>`, x, h-8, label(b.From, ov.Range.Span))
		}
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

func capMark(capped bool) string {
	if capped {
		return fmt.Sprintf(" (at least: %d read per state)", bucketCap)
	}
	return ""
}

func label(t time.Time, span time.Duration) string {
	if span > 24*time.Hour {
		return t.UTC().Format("Jan 2 15h")
	}
	return t.UTC().Format("15:04")
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten.
func niceCeil(n int) int {
	p := math.Pow(10, math.Floor(math.Log10(float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if float64(n) <= m*p {
			return int(m * p)
		}
	}
	return n
}
