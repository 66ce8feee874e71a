package client

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modelTexts are the texts of each outcome as the README and the package
// documentation show them, built by the functions of texts.go with
// placeholders for what varies.
func modelTexts() map[Outcome][]string {
	return map[Outcome][]string{
		Executed:     {textDone("<summary>")},
		AlreadyDone:  {textAlreadyDone(ScopeRun, "<summary>")},
		InProgress:   {textInProgress},
		Failed:       {textFailed("<reason>", true), textFailed("<reason>", false)},
		Uncertain:    {textUncertain, textUncertainManual},
		Conflict:     {textConflict("<tool>", "<identity>", "done", []string{"<fields>"})},
		InvalidInput: {textFieldInvalid("<tool>", "<field>", "<why>")},
	}
}

// TestREADMEModelTexts checks the README's "What the model is told" table
// against texts.go: one row per outcome, its is_error column, and its
// texts (in backquotes), in order.
func TestREADMEModelTexts(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## What the model is told\n")
	if !ok {
		t.Fatal(`README.md has no section "What the model is told"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	quoted := regexp.MustCompile("`([^`]*)`")
	rows := map[Outcome][]string{}
	isError := map[Outcome]string{}
	names := map[string]Outcome{}
	for o := Executed; o <= InvalidInput; o++ {
		name := "" // "already done" → "AlreadyDone"
		for _, w := range strings.Fields(o.String()) {
			name += strings.ToUpper(w[:1]) + w[1:]
		}
		names[name] = o
	}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 {
			continue
		}
		o, ok := names[strings.TrimSpace(cells[1])]
		if !ok {
			continue
		}
		if _, dup := rows[o]; dup {
			t.Errorf("README: two rows for %v", o)
		}
		isError[o] = strings.TrimSpace(cells[2])
		for _, m := range quoted.FindAllStringSubmatch(cells[3], -1) {
			rows[o] = append(rows[o], m[1])
		}
	}
	for o, want := range modelTexts() {
		if !slices.Equal(rows[o], want) {
			t.Errorf("README, %v: texts\n %q\nwant (texts.go)\n %q", o, rows[o], want)
		}
		wantErr := map[bool]string{true: "yes", false: "no"}[o.IsError()]
		if isError[o] != wantErr {
			t.Errorf("README, %v: is_error %q, want %q", o, isError[o], wantErr)
		}
	}
}

// TestDocModelTexts checks that the package documentation's table shows
// every text of texts.go (its lines wrap; white space is compared loosely).
func TestDocModelTexts(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for line := range strings.SplitSeq(string(src), "\n") {
		doc.WriteString(strings.TrimPrefix(line, "//"))
		doc.WriteByte(' ')
	}
	flat := strings.Join(strings.Fields(doc.String()), " ")
	for o, texts := range modelTexts() {
		for _, text := range texts {
			if !strings.Contains(flat, text) {
				t.Errorf("doc.go, %v: missing %q", o, text)
			}
		}
	}
	if host := textHostError("<tool>"); !strings.Contains(flat, host) {
		t.Errorf("doc.go: missing %q", host)
	}
}
