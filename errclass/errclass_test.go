package errclass_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oncely/oncely/errclass"
)

type classified struct{ c errclass.Class }

func (e classified) Error() string              { return "classified" }
func (e classified) ErrorClass() errclass.Class { return e.c }

func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want errclass.Class
	}{
		{nil, errclass.Ambiguous},
		{errors.New("unmarked"), errclass.Ambiguous},
		{classified{errclass.Definite}, errclass.Definite},
		{fmt.Errorf("wrapped: %w", classified{errclass.Permanent}), errclass.Permanent},
		{fmt.Errorf("outer: %w", fmt.Errorf("%w", classified{errclass.Definite})), errclass.Definite},
	} {
		if got := errclass.Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for c, want := range map[errclass.Class]string{errclass.Ambiguous: "ambiguous", errclass.Definite: "definite", errclass.Permanent: "permanent"} {
		if c.String() != want {
			t.Errorf("%d: %q, want %q", int(c), c.String(), want)
		}
	}
}
