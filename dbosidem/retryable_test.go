package dbosidem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/dbosidem"
	"github.com/idemkit/idemkit/idemfunc"
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", idemfunc.ErrConflict), false},
		{fmt.Errorf("x: %w", idemfunc.ErrInvalidInput), false},
		{fmt.Errorf("x: %w", idemfunc.ErrResultNotKept), false},
		{client.Permanent(plain), false},
		{fmt.Errorf("x: %w", idemfunc.ErrInProgress), true},
		{fmt.Errorf("x: %w", idemfunc.ErrUncertain), true},
		{client.Definite(plain), true},
		{plain, true},
	} {
		if got := dbosidem.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
