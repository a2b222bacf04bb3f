package load

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// WaitMode is how a Pacer waits for the next slot.
type WaitMode string

const (
	// WaitSpin sleeps until SpinWindow before the slot, then spins with runtime.Gosched.
	WaitSpin WaitMode = "spin"
	// WaitTimerfd arms a Linux timerfd (CLOCK_MONOTONIC, relative) and blocks reading it.
	WaitTimerfd WaitMode = "timerfd"
	// WaitSleep is plain time.Sleep (for comparison: can wake ~0.5-1 ms late).
	WaitSleep WaitMode = "sleep"
)

// DefaultWaitMode is the mode the producers use: see BenchmarkPacerFloor and the package doc
// for the measurement that picked it.
var DefaultWaitMode = WaitTimerfd

// SpinWindow is how long before a slot a WaitSpin pacer stops sleeping and starts spinning.
var SpinWindow = 200 * time.Microsecond

// TimerfdEarly is how long before a slot a WaitTimerfd pacer's timer fires; the rest is spun.
var TimerfdEarly = 30 * time.Microsecond

// Pacer hands out the open-loop schedule of one producer: slot i is due at start + i/rate.
// It never skips a slot: when the caller is behind, Next returns at once and the delay shows
// up as send delay (and as latency, which is measured from the intended time).
// With rate 0 the schedule is closed loop: every slot is "now".
//
// A Pacer belongs to one goroutine.
type Pacer struct {
	Start    time.Time
	End      time.Time // slots at or after end are not handed out
	interval float64   // ns between slots (0 = closed loop)
	n        int64
	mode     WaitMode
	tfd      *os.File // WaitTimerfd: a non-blocking timerfd read through the runtime poller
	tfdRaw   int      // its descriptor (not via tfd.Fd(), which would make it blocking)
	timer    *time.Timer
}

// NewPacer returns a pacer for rate records/s (0 = closed loop) whose slots run from start
// (inclusive) to end (exclusive).
func NewPacer(rate float64, start, end time.Time, mode WaitMode) (*Pacer, error) {
	p := &Pacer{Start: start, End: end, mode: mode}
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	switch mode {
	case WaitSpin, WaitSleep:
	case WaitTimerfd:
		// Non-blocking, so os.NewFile registers it with the runtime poller: a read parks the
		// goroutine (its P runs other goroutines) and epoll wakes it when the timer expires.
		// A blocking read(2) would hold the P for the whole wait; with two pacers on two
		// cores that starves the network poller until sysmon steps in (~10 ms stalls).
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
		if err != nil {
			return nil, fmt.Errorf("timerfd_create: %w", err)
		}
		p.tfd, p.tfdRaw = os.NewFile(uintptr(fd), "pacer-timerfd"), fd
	default:
		return nil, fmt.Errorf("pacer wait mode %q; allowed spin|timerfd|sleep", mode)
	}
	return p, nil
}

// Close releases the timerfd, if any; call it from the goroutine that called Next.
func (p *Pacer) Close() {
	if p.tfd != nil {
		p.tfd.Close()
		p.tfd = nil
	}
}

// Sent is the number of slots handed out so far.
func (p *Pacer) Sent() int64 { return p.n }

// Next waits for the next slot and returns its intended time and the actual time the wait
// ended (actual >= intended, modulo clock granularity; closed loop: both now). ok is false
// when the next slot is at or after end or ctx is done.
func (p *Pacer) Next(ctx context.Context) (intended, actual time.Time, ok bool) {
	if ctx.Err() != nil {
		return time.Time{}, time.Time{}, false
	}
	if p.interval == 0 {
		now := time.Now()
		if !now.Before(p.End) {
			return time.Time{}, time.Time{}, false
		}
		p.n++
		return now, now, true
	}
	intended = p.Start.Add(time.Duration(float64(p.n) * p.interval))
	if !intended.Before(p.End) {
		return time.Time{}, time.Time{}, false
	}
	p.n++
	now := time.Now()
	if now.Before(intended) {
		if !p.wait(ctx, intended) {
			return time.Time{}, time.Time{}, false
		}
		now = time.Now()
	}
	return intended, now, true
}

// coarse waits with a ctx-aware runtime timer until about slack before t; false if ctx ended.
func (p *Pacer) coarse(ctx context.Context, t time.Time, slack time.Duration) bool {
	d := time.Until(t) - slack
	if d <= 0 {
		return true
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d) // Go >= 1.23: no stale value can be received after Reset
	}
	select {
	case <-p.timer.C:
		return true
	case <-ctx.Done():
		p.timer.Stop()
		return false
	}
}

func (p *Pacer) wait(ctx context.Context, t time.Time) bool {
	switch p.mode {
	case WaitSleep:
		return p.coarse(ctx, t, 0)
	case WaitTimerfd:
		// Long waits through the runtime timer (ctx-aware), the last 2 ms on the timerfd.
		if time.Until(t) > 5*time.Millisecond && !p.coarse(ctx, t, 2*time.Millisecond) {
			return false
		}
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		if d -= TimerfdEarly; d <= 0 {
			return p.spin(t)
		}
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
		if err := unix.TimerfdSettime(p.tfdRaw, 0, &spec, nil); err != nil {
			return p.coarse(ctx, t, 0)
		}
		var buf [8]byte
		if _, err := p.tfd.Read(buf[:]); err != nil {
			return p.coarse(ctx, t, 0)
		}
		return p.spin(t)
	default: // WaitSpin
		if !p.coarse(ctx, t, SpinWindow) {
			return false
		}
		return p.spin(t)
	}
}

func (p *Pacer) spin(t time.Time) bool {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
	return true
}
