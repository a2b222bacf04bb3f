package workloads

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// ISREvent is one ISR change seen by the partition timeline.
type ISREvent struct {
	T         float64 `json:"t_s"` // seconds since the start of measurement
	Partition int32   `json:"partition"`
	Kind      string  `json:"kind"` // "shrink", "expand" or "change" (members swapped)
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// partTimeline samples every partition every 100 ms, less often above 100 partitions
// (sampleInterval: every second at 1,000), from the start of measurement until stopped, into
// partitions.csv, and keeps the ISR events and leaderless time for the summary. One goroutine
// runs loop; the runner reads the results after loop returned.
type partTimeline struct {
	topic    string
	minISR   int              // min.insync.replicas: the under-min-ISR column
	prods    []*load.Producer // their errors by partition and time
	ps       target.PartitionSampler
	path     string
	start    time.Time
	interval time.Duration

	prev       map[int32]target.PartitionSample
	lastErrs   map[int32]map[string]int64
	events     []ISREvent
	leaderless float64 // partition-seconds without a leader
	// noLeader lists the samples with partitions without a leader (T, count).
	noLeader []sampleCount
	// fullAt is the last time (s) every partition had its full replica set in the ISR after
	// having been under-replicated; notFull is whether it is under-replicated now.
	samples int
	full    []fullMark
	err     error
}

// sampleCount is a sample time and a partition count.
type sampleCount struct {
	T float64
	N int
}

// fullMark records when the cluster went from under-replicated to fully replicated (T) and back.
type fullMark struct {
	T    float64
	Full bool
}

// sampleInterval is the period of a sampler whose every sample costs O(partitions) (the
// timeline's, partitions.csv's): base up to samplePartitions partitions, then base per
// samplePartitions partitions (rounded up), at most limit. The samplers share the host with
// the cluster they measure: at 1,000 partitions sampled every 100 ms they took more of a
// loaded 2-core host's CPU than the cluster (the many-partitions spec's cost table), and the
// throughput they reported was theirs as much as the cluster's.
func sampleInterval(base time.Duration, partitions int, limit time.Duration) time.Duration {
	if partitions <= samplePartitions {
		return base
	}
	n := (partitions + samplePartitions - 1) / samplePartitions
	return max(base, min(base*time.Duration(n), limit))
}

// samplePartitions is how many partitions a sampler visits per base period at most (see
// sampleInterval).
const samplePartitions = 100

// partitionsCSVLimit is the longest period of partitions.csv (at 10,000 partitions).
const partitionsCSVLimit = 10 * time.Second

func newPartTimeline(s *spec.Spec, prods []*load.Producer, ps target.PartitionSampler, path string, start time.Time) *partTimeline {
	interval := sampleInterval(100*time.Millisecond, s.Topic.Partitions, partitionsCSVLimit)
	return &partTimeline{topic: s.Topic.Name, minISR: s.Topic.MinInsyncReplicas, prods: prods, ps: ps, path: path, start: start, interval: interval,
		prev: map[int32]target.PartitionSample{}, lastErrs: map[int32]map[string]int64{}}
}

// loop writes rows until ctx is done.
func (pt *partTimeline) loop(ctx context.Context) {
	f, err := os.Create(pt.path)
	if err != nil {
		pt.err = err
		return
	}
	w := results.NewPartitionsCSV(f)
	defer func() {
		if err := errors.Join(w.Flush(), f.Close()); err != nil && pt.err == nil {
			pt.err = fmt.Errorf("writing %s: %w", pt.path, err)
		}
	}()
	if !poll.At(ctx, pt.start) {
		return
	}
	tick := time.NewTicker(pt.interval)
	defer tick.Stop()
	pt.sample(w)
	for {
		select {
		case <-ctx.Done():
			pt.sample(w)
			return
		case <-tick.C:
			pt.sample(w)
		}
	}
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, " ")
}

// sample reads every partition's state and stamps it with the time the read finished: on a
// loaded machine a tick can be served late, and a state read after a fault must not be stamped
// before it (the time to shrink would read as negative, "never").
func (pt *partTimeline) sample(w *results.PartitionsCSV) {
	ss, err := pt.ps.SamplePartitions(pt.topic)
	if err != nil {
		pt.err = err
		return
	}
	t := time.Since(pt.start).Seconds()
	errs := load.PartitionErrors(pt.prods)
	dt := pt.interval.Seconds()
	full := true
	nl := 0
	for _, s := range ss {
		if s.Leader < 0 && pt.samples > 0 {
			pt.leaderless += dt
			nl++
		}
		if len(s.ISR) < len(s.Replicas) {
			full = false
		}
		if p, ok := pt.prev[s.Partition]; ok {
			kind := ""
			switch {
			case isSubset(s.ISR, p.ISR) && len(s.ISR) < len(p.ISR):
				kind = "shrink"
			case isSubset(p.ISR, s.ISR) && len(s.ISR) > len(p.ISR):
				kind = "expand"
			case !sameSet(p.ISR, s.ISR):
				kind = "change"
			}
			if kind != "" {
				pt.events = append(pt.events, ISREvent{T: t, Partition: s.Partition, Kind: kind, From: p.ISR, To: s.ISR})
			}
		}
		pt.prev[s.Partition] = s
		last := pt.lastErrs[s.Partition]
		delta := map[string]int64{}
		for code, n := range errs[s.Partition] {
			delta[code] = n - last[code]
		}
		pt.lastErrs[s.Partition] = errs[s.Partition]
		w.Write(results.PartitionRow{T: t, Partition: s.Partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
			Replicas: s.Replicas, ISR: s.ISR, HW: s.HW, LEO: s.LEO, NoLEO: s.NoLEO,
			UnderReplicated: len(s.ISR) < len(s.Replicas), UnderMinISR: len(s.ISR) < pt.minISR,
			ProduceErrors: delta, LogStart: s.LogStart})
	}
	if nl > 0 {
		pt.noLeader = append(pt.noLeader, sampleCount{T: t, N: nl})
	}
	if n := len(pt.full); n == 0 || pt.full[n-1].Full != full {
		pt.full = append(pt.full, fullMark{T: t, Full: full})
	}
	pt.samples++
}

func isSubset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameSet(a, b []int32) bool { return len(a) == len(b) && isSubset(a, b) }
