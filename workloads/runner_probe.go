package workloads

import (
	"context"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
)

// probeBudget bounds the one-at-a-time probe: a cluster that acknowledges slowly or not at all
// delays the load by at most this much (the records not sent by then are left out, and the
// result notes it).
const probeBudget = 30 * time.Second

// probed is what the one-at-a-time probe measured (r nil: no probe) and the run's note on it.
type probed struct {
	r    *load.ProbeResult
	acks string
	why  string // notes.probe: why there is no probe, or that it stopped early; "" for none
}

// runProbe runs the one-at-a-time probe of probe.records (see spec.Spec.ProbeRecords) with the
// first producer group that has producers, before the load's start offsets are read. A worker
// of several has none: the other workers' probes and loads would overlap it.
func runProbe(ctx context.Context, in *runInput, t *openTarget) (*probed, error) {
	s := in.spec
	if s.ProbeRecords == 0 {
		return &probed{}, nil
	}
	if in.opts.Worker.Active() {
		return &probed{why: fmt.Sprintf("no one-at-a-time probe on worker %s of several: the other workers' probes and loads would overlap it", in.opts.Worker)}, nil
	}
	for _, g := range s.ProducerGroups() {
		if g.Count == 0 {
			continue
		}
		r, err := load.RunProbe(ctx, t.conn, g, s.Topic.Name, s.Topic.Partitions, s.ProbeRecords, probeBudget)
		if err != nil {
			return nil, fmt.Errorf("one-at-a-time probe: %w", err)
		}
		pr := &probed{r: r, acks: g.Acks}
		if r.Stopped {
			pr.why = fmt.Sprintf("the one-at-a-time probe stopped after %s with %d of %d records sent (probe.records)", probeBudget, r.Sent, s.ProbeRecords)
			in.notef("%s", pr.why)
		}
		return pr, nil
	}
	return &probed{why: "no one-at-a-time probe: the spec has no producer"}, nil
}

// apply puts the probe into res (after res.AckLatencyUs is final): result.json probe, with
// the load's queueing factors, or a note saying why there is none.
func (pr *probed) apply(res *results.Result) {
	if pr.why != "" {
		res.Note("probe", pr.why)
	}
	if pr.r == nil {
		return
	}
	p := &results.Probe{Records: pr.r.Sent, Warmup: pr.r.Warmup, Acks: pr.acks, AckLatencyUs: results.Summarize(pr.r.Ack)}
	if len(pr.r.Errors) > 0 {
		p.Errors = pr.r.Errors
	}
	p.Queueing = results.NewQueueing(res.AckLatencyUs, p.AckLatencyUs)
	res.Probe = p
}
