package ledger_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oncely/oncely/ledger"
)

func TestCompletionFit(t *testing.T) {
	t.Parallel()
	small := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	if got := small.Fit(100); got.Truncated || string(got.Result) != `{"id":"msg_1"}` || got.Summary != "sent" {
		t.Errorf("a completion within the limits changed: %+v", got)
	}
	big := ledger.Completion{Summary: strings.Repeat("é", ledger.MaxSummaryBytes), Result: []byte(`"` + strings.Repeat("x", 200) + `"`)}
	got := big.Fit(100)
	if !got.Truncated || got.Result != nil {
		t.Errorf("an oversized result was kept: %d bytes, truncated %v", len(got.Result), got.Truncated)
	}
	if len(got.Summary) > ledger.MaxSummaryBytes || !utf8.ValidString(got.Summary) || got.Validate() != nil {
		t.Errorf("summary of %d bytes does not fit: %v", len(got.Summary), got.Validate())
	}
	// A presigned URL as the ref: clipped at a rune boundary, never refused.
	longRef := ledger.Completion{Summary: "uploaded", Ref: "https://files.example/é?sig=" + strings.Repeat("é", ledger.MaxRefBytes)}
	if got := longRef.Fit(100); len(got.Ref) > ledger.MaxRefBytes || len(got.Ref) < ledger.MaxRefBytes-1 ||
		!utf8.ValidString(got.Ref) || !strings.HasPrefix(longRef.Ref, got.Ref) || got.Validate() != nil {
		t.Errorf("ref of %d bytes does not fit: %v", len(got.Ref), got.Validate())
	}
	// The store's own limit caps any larger maxResult.
	huge := ledger.Completion{Result: make([]byte, ledger.MaxResultBytes+1)}
	if got := huge.Fit(1 << 30); !got.Truncated {
		t.Error("a result over MaxResultBytes was kept")
	}
}
