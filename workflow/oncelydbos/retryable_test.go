package oncelydbos_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/workflow/oncelydbos"
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", oncelyfunc.ErrConflict), false},
		{fmt.Errorf("x: %w", oncelyfunc.ErrInvalidInput), false},
		{fmt.Errorf("x: %w", oncelyfunc.ErrResultNotKept), false},
		{client.Permanent(plain), false},
		{fmt.Errorf("x: %w", oncelyfunc.ErrInProgress), true},
		{fmt.Errorf("x: %w", oncelyfunc.ErrUncertain), true},
		{client.Definite(plain), true},
		{plain, true},
	} {
		if got := oncelydbos.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
