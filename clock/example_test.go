package clock_test

import (
	"fmt"
	"time"

	"github.com/oncely/oncely/clock"
)

// A lease that ends two minutes after it was taken, read on a Fake that
// the test moves: nothing sleeps.
func ExampleFake() {
	clk := clock.NewFake(time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC))
	leaseUntil := clk.Now().Add(2 * time.Minute)

	clk.Advance(90 * time.Second)
	fmt.Println(clk.Now().Format(time.TimeOnly), "lease live:", clk.Now().Before(leaseUntil))
	clk.Advance(time.Minute)
	fmt.Println(clk.Now().Format(time.TimeOnly), "lease live:", clk.Now().Before(leaseUntil))
	clk.Set(time.Date(2026, 1, 2, 14, 59, 0, 0, time.UTC))
	fmt.Println(clk.Now().Format(time.TimeOnly), "lease live:", clk.Now().Before(leaseUntil))
	// Output:
	// 15:01:30 lease live: true
	// 15:02:30 lease live: false
	// 14:59:00 lease live: true
}

// Every component takes a Clock in its Config; nil (or clock.System{})
// is the wall clock.
func ExampleSystem() {
	var clk clock.Clock = clock.System{}
	before := time.Now()
	now := clk.Now()
	fmt.Println(!now.Before(before))
	// Output: true
}
