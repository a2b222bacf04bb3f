package broker

import (
	"fmt"
	"sync"

	"github.com/isrbench/isrbench/core/records"
	"sync/atomic"
	"time"
)

// The regression-gate CPU cost (Config.ProduceSpin): a fixed amount of computation per produced
// record, not a wall-clock wait. Per record rather than per request, so that the added cost per
// record is the same however many records the producers put in one request (batching changes
// with load and with the build's own speed). A sleep costs no CPU, and a spin until a deadline costs less CPU when the
// thread is descheduled meanwhile; a fixed number of iterations costs the same CPU on a quiet and
// on a loaded machine, like a real regression does.

// buildSpinFlag is more CPU work per produced record compiled into a build, added to
// Config.ProduceSpin: go build -ldflags "-X github.com/isrbench/isrbench/core/broker.buildSpinFlag=35us".
// It makes a costlier build that differs from the base build in its code only, its settings
// the same, which is how a real regression reaches the gate (isrbench gate --binary BASE run by
// the costlier build). Empty, so no extra work, in every ordinary build.
var buildSpinFlag string

const buildSpinPkg = "github.com/isrbench/isrbench/core/broker"

// buildSpin is buildSpinFlag parsed (a Go duration, 0..10ms); a bad value makes every broker of
// the build refuse to start (validateConfig), naming it.
var buildSpin = func() (b struct {
	d   time.Duration
	err error
}) {
	if buildSpinFlag == "" {
		return b
	}
	d, err := time.ParseDuration(buildSpinFlag)
	switch {
	case err != nil:
		b.err = err
	case d < 0 || d > 10*time.Millisecond:
		b.err = fmt.Errorf("%v is outside 0..10ms", d)
	default:
		b.d = d
	}
	return b
}()

// spinSink keeps the computation from being optimised away.
var spinSink atomic.Uint64

// spinIters runs n iterations of a xorshift step (a few cycles each, no memory access).
func spinIters(n int64) uint64 {
	x := uint64(88172645463325252)
	for i := int64(0); i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

var spinCal struct {
	once       sync.Once
	itersPerNs float64
}

// spinRate is the iterations per nanosecond of this machine, measured once per process: the
// fastest of several short trials, so a trial that was descheduled does not count.
func spinRate() float64 {
	spinCal.once.Do(func() {
		const n = 1 << 16
		best := time.Duration(1<<63 - 1)
		for range 7 {
			t0 := time.Now()
			spinSink.Add(spinIters(n))
			if d := time.Since(t0); d > 0 && d < best {
				best = d
			}
		}
		spinCal.itersPerNs = float64(n) / float64(best.Nanoseconds())
	})
	return spinCal.itersPerNs
}

// recordsIn counts the records of a produce request's batches (the header's recordsCount; a
// malformed batch counts as one record: the append rejects it anyway).
func recordsIn(parts []ProducePartition) int {
	n := 0
	for i := range parts {
		b := parts[i].Records
		for len(b) > 0 {
			h, err := records.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				n++
				break
			}
			n += int(h.RecordsCount)
			b = b[h.Size():]
		}
	}
	return n
}

// spin burns about d of CPU on the calling goroutine.
func spin(d time.Duration) {
	spinSink.Add(spinIters(int64(float64(d.Nanoseconds()) * spinRate())))
}
