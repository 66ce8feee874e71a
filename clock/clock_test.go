package clock_test

import (
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
)

func TestFake(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	c := clock.NewFake(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now %s, want %s", c.Now(), t0)
	}
	c.Advance(time.Minute)
	if want := t0.Add(time.Minute); !c.Now().Equal(want) {
		t.Fatalf("after Advance: %s, want %s", c.Now(), want)
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("after Set: %s, want %s", c.Now(), t0)
	}
	var _ clock.Clock = clock.System{}
	if d := time.Since(clock.System{}.Now()); d < 0 || d > time.Minute {
		t.Errorf("System is %s off", d)
	}
}
