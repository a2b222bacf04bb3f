package workloads

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
)

// faultRunner runs the spec's fault schedule during measure: one goroutine per fault, each
// recording what it did in log.
type faultRunner struct {
	in                       *runInput
	tgt                      *openTarget
	cl                       *clients // restart-producer acts on the run's own producers
	log                      *faultLog
	measureStart, measureEnd time.Time
}

// runAll applies the spec's fault schedule relative to the start of measurement and heals
// each fault after its duration, at the latest at the end of measurement; it returns when
// every fault was applied and healed (or ctx ended, in which case applied faults are still
// healed so the cluster can be read back).
func (fr *faultRunner) runAll(ctx context.Context) {
	if !fr.in.opts.Worker.First() {
		return // worker 1 of a multi-worker run runs the schedule
	}
	var wg sync.WaitGroup
	for i, f := range fr.in.spec.Faults {
		wg.Go(func() { fr.run(ctx, i, f) })
	}
	wg.Wait()
}

func (fr *faultRunner) run(ctx context.Context, i int, f spec.Fault) {
	switch f.Kind {
	case "exec":
		fr.runExecFault(ctx, i, f)
		return
	case "reassign":
		fr.runReassignFault(ctx, i, f)
		return
	case "restart-producer":
		fr.runProducerRestart(ctx, i, f)
		return
	}
	in, log, measureEnd := fr.in, fr.log, fr.measureEnd
	applied, rf, ok := fr.startAt(ctx, f, fmt.Sprintf("faults[%d]: %s %s for %s", i, f.Kind, describeTarget(f), f.Duration))
	if !ok {
		return
	}
	target, heal, err := fr.tgt.ApplyFault(ctx, in.spec.Topic.Name, f)
	rf.Target = target
	if err != nil {
		rf.Error = err.Error()
		log.add(i, rf)
		in.notef("fault %s %s: %v", f.Kind, f.Target, err)
		return
	}
	if heal != nil {
		until := applied.Add(f.Duration)
		if until.After(measureEnd) {
			until = measureEnd
		}
		poll.At(ctx, until) // on cancel: heal at once
		if err := heal(); err != nil {
			rf.Error = "heal: " + err.Error()
		}
		rf.EndS = time.Since(fr.measureStart).Seconds()
	}
	log.add(i, rf)
}

// startAt waits for fault f's time (f.At after the start of measurement) and returns when it
// started and its result.json record (kind and detail set); ok is false when ctx ended first.
func (fr *faultRunner) startAt(ctx context.Context, f spec.Fault, detail string) (applied time.Time, rf results.Fault, ok bool) {
	if !poll.At(ctx, fr.measureStart.Add(f.At)) {
		return time.Time{}, results.Fault{}, false
	}
	applied = time.Now()
	return applied, results.Fault{AtS: applied.Sub(fr.measureStart).Seconds(), Time: applied.UTC(), Kind: f.Kind, Detail: detail}, true
}

// faultLog holds the faults the schedule applied; the fault goroutines add to it, report
// reads it after they ended.
type faultLog struct {
	mu   sync.Mutex
	list []indexedFault
}

// add records fault i of the schedule.
func (l *faultLog) add(i int, f results.Fault) {
	l.mu.Lock()
	l.list = append(l.list, indexedFault{i, f})
	l.mu.Unlock()
}

// ordered returns the applied faults in schedule order (as result.json lists them).
func (l *faultLog) ordered() []results.Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.Slice(l.list, func(a, b int) bool { return l.list[a].i < l.list[b].i })
	var out []results.Fault // nil without faults: result.json omits them
	for _, f := range l.list {
		out = append(out, f.f)
	}
	return out
}

type indexedFault struct {
	i int
	f results.Fault
}

// describeTarget is the fault's target as written, with the partition for the short roles.
func describeTarget(f spec.Fault) string {
	switch f.Target {
	case "leader", "follower", "any-follower":
		return fmt.Sprintf("%s of partition %d", f.Target, f.Partition)
	}
	return f.Target
}
