// Package poll waits on observable state with deadlines, for the harness's packages: a
// condition checked at an interval (Until), a duration (Sleep) or an instant (At), each ended
// early by its context, or a function called every interval (Every). It holds no state; every function is safe for concurrent use.
package poll

import (
	"context"
	"time"
)

// Sleep waits d; false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// At waits until t; false when ctx ended first.
func At(ctx context.Context, t time.Time) bool { return Sleep(ctx, time.Until(t)) }

// Until calls check every interval until it returns "" (then ""), ctx is done or d has
// passed (then check's last answer: what is still not so).
func Until(ctx context.Context, d, every time.Duration, check func() string) string {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		why := check()
		if why == "" {
			return ""
		}
		select {
		case <-ctx.Done():
			return why
		case <-deadline.C:
			return why
		case <-tick.C:
		}
	}
}

// WhileProgress calls check every interval until it returns "" (then ""), ctx is done, idle
// has passed since progress last changed its answer, or limit has passed in all (then
// check's last answer): a wait for work that goes on as long as the work moves, however slow
// the host.
func WhileProgress(ctx context.Context, idle, limit, every time.Duration, progress func() int64, check func() string) string {
	return whileProgress(ctx, idle, limit, every, time.Now, progress, check)
}

// whileProgress is WhileProgress on the clock now: Until over limit, cancelled by its own
// check once progress stood still for idle (or limit passed on now).
func whileProgress(ctx context.Context, idle, limit, every time.Duration, now func() time.Time, progress func() int64, check func() string) string {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	start := now()
	last, moved := progress(), start
	var gaveUp string // set once stopped: Until may call once more before it sees ctx done
	return Until(ctx, limit, every, func() string {
		if gaveUp != "" {
			return gaveUp
		}
		why := check()
		if why == "" {
			return ""
		}
		t := now()
		if p := progress(); p != last {
			last, moved = p, t
		}
		if t.Sub(moved) >= idle || t.Sub(start) >= limit {
			gaveUp = why
			stop()
		}
		return why
	})
}

// Every calls fn every interval until ctx ends or fn returns false (the first call one
// interval after the start).
func Every(ctx context.Context, every time.Duration, fn func() bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}
