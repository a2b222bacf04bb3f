package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WaitMode is how a Pacer waits for the next slot.
type WaitMode string

const (
	// WaitTimerfd reads a periodic Linux timerfd (CLOCK_MONOTONIC), armed once at the slot
	// interval, through the runtime poller: one read(2) per slot. Its expirations come an
	// adaptive lead before the slots (the recent median wake-up lateness, at most
	// TimerfdEarly); the rest is spun.
	WaitTimerfd WaitMode = "timerfd"
	// WaitTimerfdOneShot arms a one-shot timerfd TimerfdEarly before each slot and reads it
	// through the runtime poller (three system calls per slot: arm, a read that finds
	// nothing, the read after the wake-up), then spins the rest: the pacer before the
	// periodic timerfd, for comparison.
	WaitTimerfdOneShot WaitMode = "timerfd-oneshot"
	// WaitSpin sleeps until SpinWindow before the slot, then spins with runtime.Gosched.
	WaitSpin WaitMode = "spin"
	// WaitSleep is plain time.Sleep (for comparison: can wake ~0.5-1 ms late).
	WaitSleep WaitMode = "sleep"
)

// WaitModes lists the modes NewPacer accepts.
var WaitModes = []WaitMode{WaitTimerfd, WaitTimerfdOneShot, WaitSpin, WaitSleep}

// DefaultWaitMode is the mode the producers use: see BenchmarkPacerFloor and the package doc
// for the measurement that picked it.
var DefaultWaitMode = WaitTimerfd

// SpinWindow is how long before a slot a WaitSpin pacer stops sleeping and starts spinning.
var SpinWindow = 200 * time.Microsecond

// TimerfdEarly is how long before a slot a WaitTimerfdOneShot pacer's timer fires, and the
// most a WaitTimerfd pacer's does; the rest is spun.
var TimerfdEarly = 30 * time.Microsecond

// leadWindow is how many wake-ups a WaitTimerfd pacer's lead is the median of.
const leadWindow = 64

// lostWakeup is how long after its expiration a WaitTimerfd pacer waits for the timer's
// readiness before it arms the timer again (a safety net: none is expected to be lost).
const lostWakeup = 20 * time.Millisecond

// ditherBlock is how many consecutive slots a dithered Pacer keeps one phase for.
const ditherBlock = 64

// Pacer hands out the open-loop schedule of one producer: slot i is due at start + i/rate,
// plus, once Dither was called, the phase of its block of ditherBlock slots.
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
	tfd      *os.File // the timerfd modes: a non-blocking timerfd read through the runtime poller
	tfdRaw   int      // its descriptor (not via tfd.Fd(), which would make it blocking)
	rc       syscall.RawConn
	readFn   func(fd uintptr) bool // readTimer
	mono     time.Time             // a monotonic clock reading taken at NewPacer
	startOff int64                 // Start - mono in ns (Start may lack a monotonic reading)
	timer    *time.Timer
	per      periodic // WaitTimerfd
	dither   bool     // Dither was called: every block's slots are shifted by its phase
	seed     uint64   // picks the blocks' phases
}

// periodic is a WaitTimerfd pacer's timer: armed at slot slot0 to expire at base (ns after
// Start) and every period ns after; fired counts the expirations read since. Expiration k
// stands for slot slot0+k, due lead ns after it.
type periodic struct {
	armed  bool
	slot0  int64
	base   int64
	period int64
	fired  int64
	lead   int64 // ns: expirations come this long before their slots
	late   [leadWindow]int64
	nLate  int

	// the wait in progress (readTimer): for expiration k, due at expires
	k, expires int64
	parked     bool
	err        error

	lost int64 // waits the lostWakeup deadline ended (tests: none)
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
	case WaitTimerfd, WaitTimerfdOneShot:
		// Non-blocking, so os.NewFile registers it with the runtime poller: a read parks the
		// goroutine (its P runs other goroutines) and epoll wakes it when the timer expires.
		// A blocking read(2) would hold the P for the whole wait; with two pacers on two
		// cores that starves the network poller until sysmon steps in (~10 ms stalls).
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
		if err != nil {
			return nil, fmt.Errorf("timerfd_create: %w", err)
		}
		p.tfd, p.tfdRaw = os.NewFile(uintptr(fd), "pacer-timerfd"), fd
		if p.rc, err = p.tfd.SyscallConn(); err != nil {
			p.tfd.Close()
			return nil, fmt.Errorf("pacer timerfd: %w", err)
		}
		p.per.lead = TimerfdEarly.Nanoseconds()
		p.readFn = p.readTimer
		p.mono = time.Now()
		p.startOff = start.Sub(p.mono).Nanoseconds()
	default:
		return nil, fmt.Errorf("pacer wait mode %q; allowed %s", mode, waitModeList())
	}
	return p, nil
}

func waitModeList() string {
	s := ""
	for i, m := range WaitModes {
		if i > 0 {
			s += "|"
		}
		s += string(m)
	}
	return s
}

// ParseWaitMode checks a pacer wait mode's name.
func ParseWaitMode(s string) (WaitMode, error) {
	if slices.Contains(WaitModes, WaitMode(s)) {
		return WaitMode(s), nil
	}
	return "", fmt.Errorf("pacer wait mode %q; allowed %s", s, waitModeList())
}

// Dither moves the schedule's phase (producers.pacer.dither): every ditherBlock slots, the
// slots of the next block are shifted by a new pseudo-random part of one interval, drawn from
// seed (pacers given the same seed move together, so producers keep their stagger). The mean
// rate stays the same, slots stay in order (each one lies within its own interval,
// [i/rate, (i+1)/rate) after start), and the timerfd is armed again once per block.
//
// Why: slots exactly 1/rate apart, at a rate whose interval divides the kernel's tick (5,000
// records/s over 2 producers: 400 µs, which divides a 1, 4 or 10 ms tick), keep the same
// phase against the tick for the whole run. The kernel fires the CPU-time timers of Go's CPU
// profiler only at ticks, so every sample then catches the same moment of the records' cycle,
// and a profile's split by goroutine (the cost table's cluster/clients/other, a flame graph)
// depends on that phase: from one run to the next the same workload gave its cluster 26 or
// 165 µs per record.
// Call it before the first Next; it does nothing to a closed loop.
func (p *Pacer) Dither(seed uint64) {
	p.dither, p.seed = p.interval > 0, seed
}

// slotNs is when slot is due, in ns after Start.
func (p *Pacer) slotNs(slot int64) int64 {
	due := int64(float64(slot) * p.interval)
	if p.dither {
		u := float64(splitmix64(p.seed^uint64(slot/ditherBlock))>>11) / (1 << 53) // [0, 1)
		due += int64(u * p.interval)
	}
	return due
}

// splitmix64 is a 64-bit mixing function (SplitMix64's finaliser): a block's phase from the
// seed and the block's number, without state.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
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

// Lead is a WaitTimerfd pacer's current lead: how long before its slot the timer expires.
func (p *Pacer) Lead() time.Duration { return time.Duration(p.per.lead) }

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
	intended = p.Start.Add(time.Duration(p.slotNs(p.n)))
	if !intended.Before(p.End) {
		return time.Time{}, time.Time{}, false
	}
	slot := p.n
	p.n++
	now := time.Now()
	if now.Before(intended) {
		if !p.wait(ctx, slot, intended) {
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

func (p *Pacer) wait(ctx context.Context, slot int64, t time.Time) bool {
	switch p.mode {
	case WaitSleep:
		return p.coarse(ctx, t, 0)
	case WaitTimerfd, WaitTimerfdOneShot:
		// Long waits through the runtime timer (ctx-aware), the last 2 ms on the timerfd.
		if time.Until(t) > 5*time.Millisecond && !p.coarse(ctx, t, 2*time.Millisecond) {
			return false
		}
		var ok bool
		if p.mode == WaitTimerfd {
			ok = p.periodicWait(slot, t)
		} else {
			ok = p.oneShotWait(t)
		}
		if !ok {
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

// oneShotWait arms the timerfd TimerfdEarly before t and reads it; false on a timerfd error.
func (p *Pacer) oneShotWait(t time.Time) bool {
	d := time.Until(t) - TimerfdEarly
	if d <= 0 {
		return true
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(p.tfdRaw, 0, &spec, nil); err != nil {
		return false
	}
	var buf [8]byte
	_, err := p.tfd.Read(buf[:])
	return err == nil
}

// periodicWait waits for the expiration of slot (due at t) of the periodic timer, arming it
// first when it is not armed for this slot's schedule; false on a timerfd error.
//
// The timer is (re)armed only when it is not running, when the lead changed or when the
// whole-nanosecond period drifted more than a microsecond from the schedule (or a dithered
// schedule's next block moved its phase): otherwise each slot costs one read(2), made only
// once the poller says the timer expired.
func (p *Pacer) periodicWait(slot int64, t time.Time) bool {
	q := &p.per
	due := p.slotNs(slot) // ns after Start
	want := due - q.lead  // when slot's expiration should come
	k := slot - q.slot0
	if !q.armed || k < 0 || absDiff(q.base+k*q.period, want) > 1000 {
		now := p.sinceStart()
		if want-now <= 0 {
			return true // within the lead already: spin
		}
		period := max(int64(p.interval+0.5), 1)
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(want - now), Interval: unix.NsecToTimespec(period)}
		if err := unix.TimerfdSettime(p.tfdRaw, 0, &spec, nil); err != nil {
			q.armed = false
			return false
		}
		*q = periodic{armed: true, slot0: slot, base: want, period: period, lead: q.lead, late: q.late, nLate: q.nLate, lost: q.lost}
		k = 0
	}
	if q.fired > k {
		return true // this slot's expiration was read already (the caller was behind)
	}
	q.k, q.expires, q.parked, q.err = k, q.base+k*q.period, false, nil
	// A safety net: should a readiness ever be lost, the read gives up lostWakeup after the
	// expiration and the next wait arms the timer again.
	if err := p.tfd.SetReadDeadline(time.Now().Add(time.Duration(q.expires-p.sinceStart()) + lostWakeup)); err != nil {
		q.armed = false
		return false
	}
	if err := p.rc.Read(p.readFn); err != nil || q.err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			q.lost++
		}
		q.armed = false
		return false
	}
	if q.parked {
		p.noteLate(p.sinceStart() - q.expires)
	}
	return true
}

// readTimer is periodicWait's RawConn.Read callback (a method value made once, so that a
// wait allocates nothing): true once expiration q.k was read.
func (p *Pacer) readTimer(fd uintptr) bool {
	q := &p.per
	if !q.parked && q.fired == q.k && p.sinceStart() < q.expires {
		// Every earlier expiration was read and this one has not come: park until the
		// poller reports the timer readable, without a read(2) that would find nothing.
		// (A periodic timerfd that expired is armed again only by the read: with an
		// expiration unread, as after slots the caller was behind on, no readiness would
		// come, and RawRead dropped the one that came before it began.)
		q.parked = true
		return false
	}
	var buf [8]byte
	n, err := unix.Read(int(fd), buf[:])
	if err == unix.EAGAIN {
		return false // a stale readiness: wait for the expiration
	}
	if err != nil || n != len(buf) {
		q.err = fmt.Errorf("timerfd read: %d bytes, %v", n, err)
		return true
	}
	q.fired += int64(binary.NativeEndian.Uint64(buf[:]))
	return q.fired > q.k
}

// noteLate records how late after its expiration a parked wait woke up; every leadWindow
// wake-ups the lead becomes their median, at most TimerfdEarly (the next wait re-arms).
func (p *Pacer) noteLate(ns int64) {
	q := &p.per
	q.late[q.nLate] = max(ns, 0)
	q.nLate++
	if q.nLate < leadWindow {
		return
	}
	q.nLate = 0
	s := q.late
	slices.Sort(s[:])
	lead := min(s[leadWindow/2], TimerfdEarly.Nanoseconds())
	if absDiff(lead, q.lead) > 1000 {
		q.lead = lead
	}
}

// sinceStart is the time since Start in ns on the monotonic clock, the timerfd's
// (CLOCK_MONOTONIC): a Start without a monotonic reading (a worker's --start-at) is placed on
// it once, at NewPacer.
func (p *Pacer) sinceStart() int64 { return time.Since(p.mono).Nanoseconds() - p.startOff }

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

func (p *Pacer) spin(t time.Time) bool {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
	return true
}
