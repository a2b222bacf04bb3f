package workloads

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
)

// A reassign fault moves partition replicas under load, as an operator moves partitions off
// a loaded broker with kafka-reassign-partitions.sh: at At, every partition of the benchmark
// topic with a replica on the fault's target broker gets a new target replica set (that
// replica replaced by one on broker To, or with Add one more on To) through the controller's
// AlterPartitionReassignments, throttled by reassign.throttle when set. The new replicas
// catch up as followers outside the ISR and join it; the reassignment of a partition
// completes when they have. A target leader-of: or follower-of: a partition of an internal
// topic (__transaction_state-N, __consumer_offsets-N) moves that partition alone: moving its
// leader's replica moves its transaction or group coordinator. The fault's end_s is when the last one completed, its detail
// the catch-up time of each partition (start to ISR join), so the run's timeline and
// latency histograms show what the move cost the load. Only the embedded target can run it.

// reassigner is a target that can reassign partitions (the embedded cluster).
type reassigner interface {
	// Reassign starts the reassign fault f on topic with the throttle (bytes/s, 0 = none)
	// and returns what it moved and a function that waits (until ctx ends) for every
	// partition to complete, then clears the throttle and returns each partition's
	// catch-up time ("topic-p": from the start until its new replicas joined the ISR; a
	// partition not caught up is absent).
	Reassign(ctx context.Context, topic string, f spec.Fault, throttle int64) (target string, wait func(context.Context) (map[string]time.Duration, error), err error)
}

// runReassignFault applies reassign fault i at its time and records when the reassignment
// completed.
func (fr *faultRunner) runReassignFault(ctx context.Context, i int, f spec.Fault) {
	s, log := fr.in.spec, fr.log
	how := "move"
	if f.Add {
		how = "add"
	}
	to := "the lowest free broker"
	if f.To >= 0 {
		to = "broker " + strconv.Itoa(int(f.To))
	}
	_, rf, ok := fr.startAt(ctx, f, fmt.Sprintf("faults[%d]: reassign: %s the replicas on %s to %s, throttle %d B/s", i, how, describeTarget(f), to, s.ReassignThrottle))
	if !ok {
		return
	}
	defer func() { log.add(i, rf) }()
	ra, ok := fr.tgt.Target.(reassigner)
	if !ok {
		rf.Error = fmt.Sprintf("the %s target cannot reassign partitions (the embedded target can)", fr.tgt.Name())
		return
	}
	target, wait, err := ra.Reassign(ctx, s.Topic.Name, f, s.ReassignThrottle)
	rf.Target = target
	if err != nil {
		rf.Error = err.Error()
		fr.in.notef("fault reassign %s: %v", f.Target, err)
		return
	}
	catchUp, err := wait(ctx)
	rf.EndS = time.Since(fr.measureStart).Seconds()
	rf.CatchUpS = map[string]float64{}
	var parts []string
	for _, tp := range slices.Sorted(maps.Keys(catchUp)) {
		rf.CatchUpS[tp] = catchUp[tp].Seconds()
		parts = append(parts, fmt.Sprintf("%s %.3fs", tp, catchUp[tp].Seconds()))
	}
	rf.Detail += "; catch-up until the new replicas joined the ISR: " + strings.Join(parts, ", ")
	if err != nil {
		rf.Error = err.Error()
	}
}
