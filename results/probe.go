package results

import (
	"fmt"
	"io"
	"math"
	"strconv"
)

// Probe is the one-at-a-time probe of a run (result.json probe): before the load, with the
// cluster ready and idle, the harness produced records one at a time, each sent once the
// previous one was acknowledged, and timed each from its send to its acknowledgement. Its p50
// is the cluster's service time with nothing queued, measured in the same invocation as the
// load; Queueing relates the load's ack latency to it. A plain value.
type Probe struct {
	// Records are the records sent after the warm-up: AckLatencyUs.Count plus the failed ones
	// (Errors). Warmup are the records sent before them, untimed (each partition's first:
	// connections, metadata, first segment writes).
	Records int64 `json:"records"`
	Warmup  int64 `json:"warmup"`
	// Acks is the acks of the probe's producer (the first producer group's).
	Acks         string  `json:"acks"`
	AckLatencyUs Summary `json:"ack_latency_us"`
	// Errors counts the records that failed, by Kafka error code name (not in the histogram).
	Errors map[string]int64 `json:"errors,omitempty"`
	// Queueing is nil when either histogram is empty.
	Queueing *Queueing `json:"queueing,omitempty"`
}

// Queueing is the load's ack latency as multiples of the probe's ack p50: how much of it is
// waiting behind other work or for idle threads and cores to wake, rather than the work
// itself (1.0: none; README, "Queueing: the one-at-a-time probe"). A plain value.
type Queueing struct {
	AckP50X float64 `json:"ack_p50_x"` // the load's ack p50 / the probe's ack p50
	AckP99X float64 `json:"ack_p99_x"` // the load's ack p99 / the probe's ack p50
}

// NewQueueing relates the load's ack latency to the probe's; nil when either has no samples
// or the probe's p50 is not positive.
func NewQueueing(load, probe Summary) *Queueing {
	if load.Count == 0 || probe.Count == 0 || probe.P50 <= 0 {
		return nil
	}
	return &Queueing{AckP50X: ratio(load.P50, probe.P50), AckP99X: ratio(load.P99, probe.P50)}
}

// ratio is a/b rounded to 3 decimals (result.json stays readable; the percentiles it divides
// have 3 significant digits).
func ratio(a, b float64) float64 {
	return float64(int64(a/b*1000+0.5)) / 1000
}

// probeMetrics are the compare/gate metrics of the probe, all lower-is-better: its ack p50
// (p50-probe, µs) and the queueing factors (queue-p50, queue-p99: the load's ack p50 and p99
// over the probe's p50). A factor is a ratio of two figures of one invocation, so it moves
// less with the host than either figure.
func probeMetrics() []Metric {
	q := func(name string, get func(*Queueing) float64) Metric {
		return Metric{Name: name, Unit: "x", Get: func(r *Result) (float64, bool) {
			if r.Probe == nil || r.Probe.Queueing == nil {
				return 0, false
			}
			return get(r.Probe.Queueing), true
		}}
	}
	return []Metric{
		{Name: "p50-probe", Unit: "µs", Get: func(r *Result) (float64, bool) {
			if r.Probe == nil || r.Probe.AckLatencyUs.Count == 0 {
				return 0, false
			}
			return r.Probe.AckLatencyUs.P50, true
		}},
		q("queue-p50", func(q *Queueing) float64 { return q.AckP50X }),
		q("queue-p99", func(q *Queueing) float64 { return q.AckP99X }),
	}
}

// printProbe prints the probe's line of the summary (nothing without a probe).
func printProbe(w io.Writer, r *Result) {
	p := r.Probe
	if p == nil {
		return
	}
	var errs string
	if len(p.Errors) > 0 {
		errs = "; probe records failed: " + joinSorted(p.Errors)
	}
	switch q := p.Queueing; {
	case q != nil:
		fmt.Fprintf(w, "queueing: ack p50 %sx, p99 %sx the one-at-a-time ack p50 (%s µs over %d records, acks=%s, before the load)%s\n",
			fmtFactor(q.AckP50X), fmtFactor(q.AckP99X), fmtUs(p.AckLatencyUs.P50), p.AckLatencyUs.Count, p.Acks, errs)
	case p.AckLatencyUs.Count == 0:
		fmt.Fprintf(w, "queueing: not measured: the one-at-a-time probe timed no record%s\n", errs)
	default:
		fmt.Fprintf(w, "queueing: not measured: the load acknowledged no record (one at a time: ack p50 %s µs over %d records)%s\n",
			fmtUs(p.AckLatencyUs.P50), p.AckLatencyUs.Count, errs)
	}
}

// fmtFactor renders a queueing factor: two decimals below 10 (1.86), one above (33.3),
// without trailing zeros (2.5).
func fmtFactor(v float64) string {
	scale := 100.0
	if v >= 10 {
		scale = 10
	}
	return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64)
}
