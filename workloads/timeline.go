package workloads

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// timeline samples the run every interval from the start of measurement: throughput, interval
// ack and HW-lag p99, ISR min/max, under-replicated partitions; it writes timeline.csv and the
// progress line. One goroutine runs loop; the runner reads the totals after loop returned.
type timeline struct {
	tgt        target.Target // sampled (Sample) for the ISR and offsets columns
	spec       *spec.Spec    // the topic, warm-up and duration
	prods      []*load.Producer
	hwInterval func() *results.Histogram // the HW lag since the last call (hw_lag_p99_us)
	quiet      bool
	stderr     io.Writer // the progress line and the sampling errors
	path       string
	f          *os.File
	tl         *results.Timeline
	start, end time.Time
	interval   time.Duration

	lastRecs, lastBytes, lastErrs int64
	base, last                    target.Sample
	haveBase, haveLast            bool
	sampleErr                     error
	underReplicatedS              float64

	tty       bool
	lastPrint time.Time
	// started is set when loop starts; loop then closes f.
	started atomic.Bool
}

// newTimeline creates path for a timeline of s's topic over [start, end] that samples tgt
// every interval, with the producers' counters and hwInterval's HW lag; the progress line
// and the sampling errors go to stderr unless quiet.
func newTimeline(s *spec.Spec, tgt target.Target, prods []*load.Producer, hwInterval func() *results.Histogram,
	interval time.Duration, quiet bool, stderr io.Writer, path string, start, end time.Time) (*timeline, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	tl, err := results.NewTimeline(f, "shrinks", "expands", "hw_total", "leo_total", "max_lag", "leaders")
	if err != nil {
		f.Close()
		return nil, err
	}
	t := &timeline{tgt: tgt, spec: s, prods: prods, hwInterval: hwInterval, quiet: quiet, stderr: stderr,
		path: path, f: f, tl: tl, start: start, end: end, interval: interval}
	if sf, ok := t.stderr.(*os.File); ok {
		if st, err := sf.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			t.tty = true
		}
	}
	return t, nil
}

func (t *timeline) shrinks() int64 {
	if !t.haveBase || !t.haveLast {
		return 0
	}
	return t.last.Shrinks - t.base.Shrinks
}

// controllerShrinks is the part of shrinks the controller made (fencing), not a leader.
func (t *timeline) controllerShrinks() int64 {
	if !t.haveBase || !t.haveLast {
		return 0
	}
	return t.last.ControllerShrinks - t.base.ControllerShrinks
}

func (t *timeline) expands() int64 {
	if !t.haveBase || !t.haveLast {
		return 0
	}
	return t.last.Expands - t.base.Expands
}

func (t *timeline) sample(ctx context.Context) (target.Sample, bool) {
	sctx, cancel := context.WithTimeout(ctx, t.interval)
	defer cancel()
	s, err := t.tgt.Sample(sctx, t.spec.Topic.Name)
	if err != nil {
		if t.sampleErr == nil && !t.quiet {
			fmt.Fprintf(t.stderr, "timeline: sampling the cluster: %v\n", err)
		}
		t.sampleErr = err
		return target.Sample{}, false
	}
	return s, true
}

// loop runs until ctx is done; it writes rows during [start, end] and keeps sampling ISR
// changes until it stops.
func (t *timeline) loop(ctx context.Context) {
	t.started.Store(true)
	defer t.f.Close()
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	prev := t.start
	for {
		select {
		case <-ctx.Done():
			if s, ok := t.sample(context.Background()); ok {
				t.last, t.haveLast = s, true
			}
			if t.tty && !t.quiet {
				fmt.Fprint(t.stderr, "\n")
			}
			if err := t.tl.Flush(); err != nil && !t.quiet {
				fmt.Fprintf(t.stderr, "timeline: %v\n", err)
			}
			return
		case now := <-tick.C:
			if now.Before(t.start) {
				t.progress(now, 0, 0, 0)
				continue
			}
			if !t.haveBase {
				// First tick of the measurement: baseline of the cumulative counters.
				if s, ok := t.sample(ctx); ok {
					t.base, t.haveBase = s, true
					t.last, t.haveLast = s, true
				}
				t.takeInterval()
				prev = now
				continue
			}
			if now.After(t.end.Add(t.interval / 2)) {
				if s, ok := t.sample(ctx); ok {
					t.last = s
				}
				continue
			}
			t.row(ctx, now, now.Sub(prev))
			prev = now
		}
	}
}

// takeInterval returns the counters' deltas and the interval histograms since the last call.
func (t *timeline) takeInterval() (recs, bytes, errs int64, ack, hw *results.Histogram) {
	ack = results.NewHistogram()
	var r, b, e int64
	for _, p := range t.prods {
		ack.Merge(p.Ack.Interval())
		r += p.NAcked.Load()
		b += p.NBytes.Load()
		e += p.NErrs.Load()
	}
	hw = t.hwInterval()
	recs, bytes, errs = r-t.lastRecs, b-t.lastBytes, e-t.lastErrs
	t.lastRecs, t.lastBytes, t.lastErrs = r, b, e
	return
}

func (t *timeline) row(ctx context.Context, now time.Time, dt time.Duration) {
	recs, bytes, errs, ack, hw := t.takeInterval()
	secs := dt.Seconds()
	row := results.TimelineRow{
		T:           now.Sub(t.start).Round(time.Millisecond).Seconds(),
		RecordsPerS: float64(recs) / secs, MBPerS: float64(bytes) / secs / 1e6,
		AckP99Us: float64(ack.Quantile(99)), HWLagP99Us: float64(hw.Quantile(99)),
		Errors: errs,
	}
	s, ok := t.sample(ctx)
	if ok {
		t.last, t.haveLast = s, true
		row.ISRMin, row.ISRMax, row.UnderReplicated, row.UnderMinISR = s.ISRMin, s.ISRMax, s.UnderReplicated, s.UnderMinISR
		if s.UnderReplicated > 0 {
			t.underReplicatedS += secs
		}
	}
	row.Extra = []any{t.shrinks(), t.expands(), s.HWTotal, s.LEOTotal, s.MaxLag, fmt.Sprint(s.Leaders)}
	if err := t.tl.Write(row); err != nil && !t.quiet {
		fmt.Fprintf(t.stderr, "timeline: %v\n", err)
	}
	t.progress(now, row.RecordsPerS, row.MBPerS, row.AckP99Us)
}

// progress prints the live line: \r-updated on a terminal, one line every 5 s otherwise.
func (t *timeline) progress(now time.Time, rps, mbps, p99 float64) {
	if t.quiet {
		return
	}
	if !t.tty && now.Sub(t.lastPrint) < 5*time.Second {
		return
	}
	t.lastPrint = now
	var line string
	if now.Before(t.start) {
		w := t.spec.Warmup
		line = fmt.Sprintf("warm-up %4.1fs/%s", max(w-t.start.Sub(now), 0).Seconds(), w)
	} else {
		el := now.Sub(t.start)
		line = fmt.Sprintf("%5.1fs/%s (%s left)  %8.0f records/s  %7.2f MB/s  ack p99 %s µs",
			el.Seconds(), t.spec.Duration, max(t.end.Sub(now), 0).Round(time.Second), rps, mbps,
			results.FormatValue(p99))
	}
	if t.tty {
		fmt.Fprintf(t.stderr, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(t.stderr, line)
	}
}
