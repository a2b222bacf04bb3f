package poll

import (
	"context"
	"testing"
	"time"
)

// TestWhileProgress, on a clock that moves 10 ms at each reading: the wait goes on past idle
// while progress moves and ends when check is satisfied; it gives up once progress stands
// still for idle, or at limit, or when ctx ends.
func TestWhileProgress(t *testing.T) {
	ctx := context.Background()
	const idle = 50 * time.Millisecond
	clock := func() func() time.Time {
		t0 := time.Unix(0, 0)
		return func() time.Time { t0 = t0.Add(10 * time.Millisecond); return t0 }
	}
	t.Run("moving", func(t *testing.T) {
		var p, checks int64
		got := whileProgress(ctx, idle, time.Minute, time.Microsecond, clock(), func() int64 { return p }, func() string {
			if checks++; checks < 40 { // 400 ms of the clock, 8 times idle
				p++
				return "behind"
			}
			return ""
		})
		if got != "" {
			t.Fatalf("gave up (%q) after %d checks while progress moved", got, checks)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		checks := 0
		got := whileProgress(ctx, idle, time.Minute, time.Microsecond, clock(), func() int64 { return 7 }, func() string { checks++; return "behind" })
		if got != "behind" || checks != 5 {
			t.Fatalf("%q after %d checks, want \"behind\" after 5 (50 ms without progress)", got, checks)
		}
	})
	t.Run("limit", func(t *testing.T) {
		var p int64
		checks := 0
		got := whileProgress(ctx, time.Minute, idle, time.Microsecond, clock(), func() int64 { p++; return p }, func() string { checks++; return "behind" })
		if got != "behind" || checks != 5 {
			t.Fatalf("%q after %d checks, want \"behind\" at the 50 ms limit (5 checks)", got, checks)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if got := WhileProgress(cctx, time.Minute, time.Minute, time.Millisecond, func() int64 { return 0 }, func() string { return "behind" }); got != "behind" {
			t.Fatalf("%q, want \"behind\"", got)
		}
	})
}
