package load

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// runNoop drives a pacer against a no-op sink and returns the send-delay histogram (µs) and
// the number of slots handed out. Values are in ns.
func runNoop(t testing.TB, mode WaitMode, rate float64, d time.Duration) (*hdrhistogram.Histogram, int64) {
	start := time.Now().Add(time.Millisecond)
	p, err := NewPacer(rate, start, start.Add(d), mode)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := hdrhistogram.New(1, 60_000_000_000, 3)
	for {
		intended, actual, ok := p.Next(context.Background())
		if !ok {
			break
		}
		if actual.Before(intended) {
			t.Fatalf("slot %d handed out %v before its intended time", p.Sent(), intended.Sub(actual))
		}
		_ = h.RecordValue(actual.Sub(intended).Nanoseconds())
	}
	return h, p.Sent()
}

func TestPacerKeepsSchedule(t *testing.T) {
	for _, mode := range WaitModes {
		t.Run(string(mode), func(t *testing.T) {
			const rate, d = 5000.0, 300 * time.Millisecond
			began := time.Now()
			h, n := runNoop(t, mode, rate, d)
			took := time.Since(began)
			// Exactly one slot per 1/rate: none skipped, none extra.
			if want := int64(rate * d.Seconds()); n != want {
				t.Fatalf("%d slots, want %d", n, want)
			}
			// The pacer never runs ahead (checked per slot in runNoop) and does not fall
			// behind for good: the last slot is handed out soon after the schedule ends. The
			// bound is loose: the race detector and 2 shared cores slow everything down.
			if took < d {
				t.Fatalf("finished in %v, before the %v schedule", took, d)
			}
			if took > d+2*time.Second {
				t.Fatalf("finished %v after the %v schedule: the pacer falls behind", took-d, d)
			}
			t.Logf("%s: send delay p50 %d µs p99 %d µs max %d µs (%d slots)", mode,
				h.ValueAtQuantile(50)/1000, h.ValueAtQuantile(99)/1000, h.Max()/1000, n)
		})
	}
}

func TestPacerNeverSkips(t *testing.T) {
	// The sink stalls 50 ms on slots 10 and 200; the slots due meanwhile are handed out at
	// once afterwards (send delay up to ~50 ms), none is skipped, and the pacer keeps to its
	// schedule after (a periodic timer whose expirations went unread must still wake it).
	for _, mode := range WaitModes {
		t.Run(string(mode), func(t *testing.T) {
			start := time.Now()
			p, err := NewPacer(2000, start, start.Add(200*time.Millisecond), mode)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			type result struct{ n, late int }
			done := make(chan result, 1)
			go func() {
				var r result
				for {
					intended, actual, ok := p.Next(context.Background())
					if !ok {
						break
					}
					r.n++
					if actual.Sub(intended) > 20*time.Millisecond {
						r.late++
					}
					if r.n == 10 || r.n == 200 {
						stall := time.NewTimer(50 * time.Millisecond) // the sink is slow: a real stall, not a wait for state
						<-stall.C
					}
				}
				done <- r
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the pacer did not hand out its 400 slots within 60 s of a 200 ms schedule: stuck")
			}
			if r.n != 400 {
				t.Fatalf("%d slots, want 400", r.n)
			}
			if r.late < 40 {
				t.Fatalf("only %d slots were late after two 50 ms stalls; the backlog must show as send delay", r.late)
			}
			if p.per.lost != 0 {
				t.Fatalf("%d timer wake-ups were lost (each one ended by the %v deadline)", p.per.lost, lostWakeup)
			}
		})
	}
}

func TestPacerClosedLoopAndCancel(t *testing.T) {
	start := time.Now()
	p, _ := NewPacer(0, start, start.Add(time.Hour), WaitSpin)
	for i := 0; i < 100; i++ {
		in, act, ok := p.Next(context.Background())
		if !ok || !in.Equal(act) {
			t.Fatalf("closed loop slot %d: ok=%v intended=%v actual=%v", i, ok, in, act)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow, _ := NewPacer(0.001, start, start.Add(time.Hour), WaitSpin)
	slow.Next(ctx) // slot 0 is due now
	done := make(chan bool)
	go func() { _, _, ok := slow.Next(ctx); done <- ok }()
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Next returned a slot after cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after cancel")
	}
	if _, err := NewPacer(1, start, start, "busy"); err == nil {
		t.Fatal("unknown wait mode accepted")
	}
}

// BenchmarkPacerFloor measures the pacer's send delay against a no-op sink at 5000 slots/s:
//
//	go test -run '^$' -bench PacerFloor -benchtime 1x ./workloads/load/
func BenchmarkPacerFloor(b *testing.B) {
	for _, mode := range WaitModes {
		for _, rate := range []float64{5000, 50000} {
			b.Run(fmt.Sprintf("%s/rate=%g", mode, rate), func(b *testing.B) {
				b.ReportAllocs()
				h := hdrhistogram.New(1, 60_000_000_000, 3)
				cpu0 := cpuTime()
				var slots int64
				for i := 0; i < b.N; i++ {
					hh, n := runNoop(b, mode, rate, time.Second)
					h.Merge(hh)
					slots += n
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(slots), "cpu-µs/slot")
				b.ReportMetric(float64(h.ValueAtQuantile(50))/1e3, "p50-µs")
				b.ReportMetric(float64(h.ValueAtQuantile(99))/1e3, "p99-µs")
				b.ReportMetric(float64(h.ValueAtQuantile(99.9))/1e3, "p999-µs")
				b.ReportMetric(float64(h.Max())/1e3, "max-µs")
			})
		}
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestPacerDither(t *testing.T) {
	const rate, d = 5000.0, 300 * time.Millisecond
	interval := time.Duration(1e9 / rate)
	for _, mode := range WaitModes {
		t.Run(string(mode), func(t *testing.T) {
			start := time.Now().Add(time.Millisecond)
			p, err := NewPacer(rate, start, start.Add(d), mode)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Dither(42)
			offsets := map[int64]time.Duration{} // block -> its slots' shift
			var prev time.Time
			var n int64
			for {
				intended, actual, ok := p.Next(context.Background())
				if !ok {
					break
				}
				if actual.Before(intended) {
					t.Fatalf("slot %d handed out %v before its intended time", n, intended.Sub(actual))
				}
				if !intended.After(prev) {
					t.Fatalf("slot %d intended at %v, not after slot %d's %v", n, intended, n-1, prev)
				}
				prev = intended
				off := intended.Sub(start) - time.Duration(n)*interval
				if off < 0 || off >= interval {
					t.Fatalf("slot %d shifted by %v, outside its own interval [0, %v)", n, off, interval)
				}
				b := n / ditherBlock
				if o, seen := offsets[b]; seen && o != off {
					t.Fatalf("slot %d shifted by %v, block %d's other slots by %v", n, off, b, o)
				}
				offsets[b] = off
				n++
			}
			// The rate is unchanged: every slot of the window, none extra.
			if want := int64(rate * d.Seconds()); n != want {
				t.Fatalf("%d slots, want %d", n, want)
			}
			// The phase moves from block to block, over the whole interval.
			lo, hi := interval, time.Duration(0)
			distinct := map[time.Duration]bool{}
			for _, o := range offsets {
				lo, hi = min(lo, o), max(hi, o)
				distinct[o] = true
			}
			if len(distinct) < len(offsets)*3/4 || lo > interval/4 || hi < interval*3/4 {
				t.Fatalf("%d blocks with %d distinct shifts from %v to %v: the phase does not move over the %v interval", len(offsets), len(distinct), lo, hi, interval)
			}
			if p.per.lost != 0 {
				t.Fatalf("%d timer wake-ups were lost", p.per.lost)
			}
		})
	}
}
