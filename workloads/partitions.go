package workloads

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
)

// PartitionSample is the replication state of one partition at one moment.
type PartitionSample struct {
	Partition   int32
	Leader      int32 // -1 = no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	HW          int64           // the leader's HW (exclusive); -1 when there is no leader
	LEO         map[int32]int64 // each running replica's own LEO (exclusive); a stopped replica is absent
	// LogStart is the leader's log start offset (inclusive); -1 when there is no leader.
	LogStart int64
	// NoLEO is set when the target cannot see any replica's LEO (a kafka:// cluster: Kafka
	// clients see the HW and the log start, never an LEO): partitions.csv says "n/a".
	NoLEO bool
}

// ISREvent is one ISR change seen by the partition timeline.
type ISREvent struct {
	T         float64 `json:"t_s"` // seconds since the start of measurement
	Partition int32   `json:"partition"`
	Kind      string  `json:"kind"` // "shrink", "expand" or "change" (members swapped)
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// partTimeline samples every partition every 100 ms (from the start of measurement until
// stopped) into partitions.csv, and keeps the ISR events and leaderless time for the
// summary. One goroutine runs loop; the runner reads the results after loop returned.
type partTimeline struct {
	r        *run
	ps       partitionSampler
	path     string
	start    time.Time
	interval time.Duration

	prev       map[int32]PartitionSample
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

func newPartTimeline(r *run, ps partitionSampler, path string, start time.Time) *partTimeline {
	return &partTimeline{r: r, ps: ps, path: path, start: start, interval: 100 * time.Millisecond,
		prev: map[int32]PartitionSample{}, lastErrs: map[int32]map[string]int64{}}
}

var partitionsHeader = []string{"t_s", "partition", "leader", "leader_epoch", "replicas", "isr", "hw", "leo",
	"under_replicated", "under_min_isr", "produce_errors", "log_start"}

// loop writes rows until ctx is done.
func (pt *partTimeline) loop(ctx context.Context) {
	f, err := os.Create(pt.path)
	if err != nil {
		pt.err = err
		return
	}
	w := csv.NewWriter(f)
	defer func() {
		w.Flush()
		if err := errors.Join(w.Error(), f.Close()); err != nil && pt.err == nil {
			pt.err = fmt.Errorf("writing %s: %w", pt.path, err)
		}
	}()
	_ = w.Write(partitionsHeader) // a write error sticks in w: reported by the deferred check
	if !waitUntil(ctx, pt.start) {
		return
	}
	tick := time.NewTicker(pt.interval)
	defer tick.Stop()
	pt.sample(w, time.Now())
	for {
		select {
		case <-ctx.Done():
			pt.sample(w, time.Now())
			return
		case now := <-tick.C:
			pt.sample(w, now)
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

func (pt *partTimeline) sample(w *csv.Writer, now time.Time) {
	ss, err := pt.ps.SamplePartitions(pt.r.spec.Topic.Name)
	if err != nil {
		pt.err = err
		return
	}
	t := now.Sub(pt.start).Seconds()
	errs := pt.r.partitionErrors()
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
		var leo []string
		for _, r := range s.Replicas {
			if s.NoLEO {
				leo = append(leo, fmt.Sprintf("%d:n/a", r))
			} else if v, ok := s.LEO[r]; ok {
				leo = append(leo, fmt.Sprintf("%d:%d", r, v))
			} else {
				leo = append(leo, fmt.Sprintf("%d:-", r))
			}
		}
		var ecol []string
		last := pt.lastErrs[s.Partition]
		for code, n := range errs[s.Partition] {
			if d := n - last[code]; d > 0 {
				ecol = append(ecol, fmt.Sprintf("%s=%d", code, d))
			}
		}
		sort.Strings(ecol)
		pt.lastErrs[s.Partition] = errs[s.Partition]
		ur, umi := 0, 0
		if len(s.ISR) < len(s.Replicas) {
			ur = 1
		}
		if len(s.ISR) < pt.r.spec.Topic.MinInsyncReplicas {
			umi = 1
		}
		_ = w.Write([]string{strconv.FormatFloat(t, 'f', 3, 64), strconv.Itoa(int(s.Partition)), strconv.Itoa(int(s.Leader)),
			strconv.Itoa(int(s.LeaderEpoch)), ids(s.Replicas), ids(s.ISR), strconv.FormatInt(s.HW, 10), strings.Join(leo, " "),
			strconv.Itoa(ur), strconv.Itoa(umi), strings.Join(ecol, " "), strconv.FormatInt(s.LogStart, 10)})
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

// FaultTimes are the timeline figures of one fault.
type FaultTimes struct {
	// ShrinkAfterS is the time from the fault's start to the first ISR shrink after it (-1: none).
	ShrinkAfterS float64
	// RejoinAfterS is the time from the fault's end to every partition having its full ISR
	// again (-1: never within the run; 0 for a fault that never shrank anything and ended fully replicated).
	RejoinAfterS float64
	// FailedProduces counts failed records whose intended send time lies in [start, end+rejoin].
	FailedProduces int64
	// LeaderlessS is the partition-seconds without a leader in [start, end+rejoin].
	LeaderlessS float64
}

// faultTimes computes FaultTimes for a fault applied at at and healed at end (seconds since
// the start of measurement; end 0 = instantaneous).
func (pt *partTimeline) faultTimes(at, end float64) FaultTimes {
	ft := FaultTimes{ShrinkAfterS: -1, RejoinAfterS: -1}
	for _, e := range pt.events {
		if e.T >= at && (e.Kind == "shrink" || e.Kind == "change") {
			ft.ShrinkAfterS = e.T - at
			break
		}
	}
	instant := end <= at
	if instant {
		end = at
	}
	// The state at end, then the first moment after it when the cluster is (again) fully
	// replicated. An instantaneous fault (a restart) shrinks the ISR only after it ended:
	// then the rejoin is counted from its end to the full ISR after that shrink.
	full, from := true, end
	for _, m := range pt.full {
		if m.T <= end {
			full = m.Full
		} else if instant && full && !m.Full {
			full = false
			break
		} else {
			break
		}
	}
	if full {
		ft.RejoinAfterS = 0
		return ft
	}
	for _, m := range pt.full {
		if m.T > from && m.Full {
			ft.RejoinAfterS = m.T - end
			break
		}
	}
	return ft
}

// summarize fills the report's ISR and fault figures and appends them to each fault's detail
// in res.
func (pt *partTimeline) summarize(res *results.Result, rep *FaultsReport) {
	rep.PartitionsCSV = filepath.Base(pt.path)
	rep.ISREvents = pt.events
	rep.LeaderlessPartitionS = round3(pt.leaderless)
	for _, e := range pt.events {
		switch e.Kind {
		case "shrink":
			rep.ISRShrinks++
		case "expand":
			rep.ISRExpands++
		}
	}
	rep.Faults = nil
	for i := range res.Faults {
		f := &res.Faults[i]
		ft := pt.faultTimes(f.AtS, f.EndS)
		until := max(f.EndS, f.AtS) + max(ft.RejoinAfterS, 0)
		ft.FailedProduces = pt.r.failedBetween(f.AtS, until)
		for _, m := range pt.noLeader {
			if m.T > f.AtS && m.T <= until+pt.interval.Seconds()/2 {
				ft.LeaderlessS += float64(m.N) * pt.interval.Seconds()
			}
		}
		rep.Faults = append(rep.Faults, FaultFigures{Kind: f.Kind, Target: f.Target, AtS: round3(f.AtS), EndS: round3(f.EndS),
			TimeToShrinkS: round3(ft.ShrinkAfterS), TimeToRejoinS: round3(ft.RejoinAfterS),
			FailedProduces: ft.FailedProduces, LeaderlessPartitionS: round3(ft.LeaderlessS)})
		f.Detail += fmt.Sprintf("; ISR shrink %s after start, full ISR %s after end, %d failed produces, %.1f partition-s without a leader",
			secs(ft.ShrinkAfterS), secs(ft.RejoinAfterS), ft.FailedProduces, ft.LeaderlessS)
	}
}

// print prints the report under the summary table: producer groups, ISR events, faults.
func (rep *FaultsReport) print(w io.Writer) {
	if len(rep.ProducerGroups) > 1 {
		for _, g := range rep.ProducerGroups {
			fmt.Fprintf(w, "producer group %d (acks=%s, %d producers): %d failed %s\n", g.Group, g.Acks, g.Count, g.Failed, formatCounts(g.Errors))
		}
	}
	if rep.ReplicaLogs != nil {
		rl := rep.ReplicaLogs
		fmt.Fprintf(w, "replica logs: %d read, identical %v, acknowledged records missing on a replica %d %s%s\n",
			rl.Checked, rl.Identical, rl.Lost, rl.Note, rl.Error)
	}
	if rep.PartitionsCSV == "" {
		return
	}
	const maxEvents = 24
	fmt.Fprintf(w, "isr events (%s, 100 ms): %d shrinks, %d expands, %.1f partition-s without a leader\n",
		rep.PartitionsCSV, rep.ISRShrinks, rep.ISRExpands, rep.LeaderlessPartitionS)
	for i, e := range rep.ISREvents {
		if i == maxEvents {
			fmt.Fprintf(w, "  ... %d more\n", len(rep.ISREvents)-maxEvents)
			break
		}
		fmt.Fprintf(w, "  %7.2fs  partition %-3d %-6s isr [%s] -> [%s]\n", e.T, e.Partition, e.Kind, ids(e.From), ids(e.To))
	}
	for i, f := range rep.Faults {
		fmt.Fprintf(w, "fault %d %s %s: at %.2fs, healed %s; time to shrink %s, time to rejoin %s, failed produces %d, without a leader %.1f partition-s\n",
			i, f.Kind, f.Target, f.AtS, secsOrNever(f.EndS), secs(f.TimeToShrinkS), secs(f.TimeToRejoinS), f.FailedProduces, f.LeaderlessPartitionS)
	}
}

func round3(v float64) float64 {
	return float64(int64(v*1000+0.5*sign(v))) / 1000
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

func secs(v float64) string {
	if v < 0 {
		return "never"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "s"
}

func secsOrNever(v float64) string {
	if v == 0 {
		return "-"
	}
	return "at " + strconv.FormatFloat(v, 'f', 2, 64) + "s"
}

// SamplePartitions reads every partition of topic: leader, epoch and ISR from the controller,
// HW from the leader's replica, LEO from each running replica.
func (e *embedded) SamplePartitions(topic string) ([]PartitionSample, error) {
	st, ok := e.c.Controller().Partitions(topic)
	if !ok {
		return nil, fmt.Errorf("partition timeline: no topic %s", topic)
	}
	out := make([]PartitionSample, 0, len(st))
	for _, ps := range st {
		s := PartitionSample{Partition: ps.Partition, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			Replicas: ps.Replicas, ISR: ps.ISR, HW: -1, LEO: map[int32]int64{}, LogStart: -1}
		for _, id := range ps.Replicas {
			if e.isStopped(id) {
				continue
			}
			b := e.c.Broker(id)
			if b == nil {
				continue
			}
			r, ok := b.Replica(topic, ps.Partition)
			if !ok {
				continue
			}
			s.LEO[id] = r.LEO()
			if id == ps.Leader {
				s.HW, s.LogStart = r.HW(), r.LogStart()
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// ReplicationReady reports "" when every partition of topic has a leader and every running
// follower in its ISR has fetched from it at least once (the leader knows its LEO), else the
// first partition and follower that has not.
func (e *embedded) ReplicationReady(topic string) string {
	st, ok := e.c.Controller().Partitions(topic)
	if !ok {
		return "no topic " + topic
	}
	for _, ps := range st {
		if ps.Leader < 0 {
			return fmt.Sprintf("partition %d has no leader", ps.Partition)
		}
		b := e.c.Broker(ps.Leader)
		if b == nil || e.isStopped(ps.Leader) {
			return fmt.Sprintf("partition %d: leader %d is not running", ps.Partition, ps.Leader)
		}
		r, ok := b.Replica(topic, ps.Partition)
		if !ok || !r.IsLeader() {
			return fmt.Sprintf("partition %d: broker %d has not taken leadership yet", ps.Partition, ps.Leader)
		}
		for _, id := range ps.ISR {
			if id != ps.Leader && !e.isStopped(id) && r.FollowerLEO(id) < 0 {
				return fmt.Sprintf("partition %d: follower %d has not fetched from leader %d yet", ps.Partition, id, ps.Leader)
			}
		}
	}
	return ""
}

// replicaReport is the verdict of the replica-log check.
type replicaReport struct {
	identical bool
	why       string
	checked   int   // replica logs read
	lost      int64 // acknowledged records below the HW missing from some running replica's log
	err       error
}

func (rep replicaReport) apply(res *results.Result, fr *FaultsReport) {
	fr.ReplicaLogs = &ReplicaLogs{Checked: rep.checked, Lost: rep.lost, Identical: rep.identical, Note: rep.why}
	if rep.err != nil {
		fr.ReplicaLogs.Error = rep.err.Error()
	}
	if !rep.identical {
		res.Durability.ReplicasIdentical = false
		res.Note("durability.replica_logs", rep.why)
	}
}

// checkReplicaLogs reads every partition from start[p] (inclusive; or from the latest log
// start of its replicas where retention deleted past it) to the leader's HW
// (exclusive) from the leader's log and from every running replica's log, parsing the
// batches, and checks that each replica holds the same records (offset, producer id, seq) as
// the leader, and that no acknowledged record of the leader's range is missing on a replica.
func checkReplicaLogs(rr replicaReader, topic string, start []int64, prods []*producer) replicaReport {
	rep := replicaReport{identical: true}
	type rec struct {
		pid uint32
		seq uint64
	}
	acked := func(h Header) bool {
		for _, p := range prods {
			if p.id == h.ProducerID {
				p.mu.Lock()
				ok := p.acked.has(h.Seq)
				p.mu.Unlock()
				return ok
			}
		}
		return false
	}
	for p := range start {
		leader, hw, replicas, err := rr.PartitionReplicas(topic, int32(p))
		if err != nil {
			rep.err = err
			continue
		}
		if leader < 0 {
			rep.identical = false
			rep.why = fmt.Sprintf("partition %d has no leader", p)
			continue
		}
		// Retention runs on each broker by itself: compare from the latest log start of
		// the replicas (inclusive), never below start[p].
		from := start[p]
		for _, id := range append([]int32{leader}, replicas...) {
			if ls, err := rr.ReplicaLogStart(topic, int32(p), id); err == nil {
				from = max(from, min(ls, hw))
			}
		}
		want := make(map[int64]rec)
		err = rr.ReadReplica(topic, int32(p), leader, from, hw, func(off int64, v []byte) {
			h, _ := ParseHeader(v)
			want[off] = rec{h.ProducerID, h.Seq}
		})
		rep.checked++
		if err != nil {
			rep.err = err
			continue
		}
		for _, id := range replicas {
			if id == leader {
				continue
			}
			got := 0
			diff := ""
			err := rr.ReadReplica(topic, int32(p), id, from, hw, func(off int64, v []byte) {
				h, _ := ParseHeader(v)
				got++
				if w, ok := want[off]; !ok || w != (rec{h.ProducerID, h.Seq}) {
					if diff == "" {
						diff = fmt.Sprintf("partition %d offset %d: replica %d has producer %d seq %d, leader %d has %+v",
							p, off, id, h.ProducerID, h.Seq, leader, w)
					}
				}
			})
			rep.checked++
			if err != nil {
				if rep.err == nil {
					rep.err = err
				}
				rep.identical = false
				if rep.why == "" {
					rep.why = err.Error()
				}
				continue
			}
			if got != len(want) && diff == "" {
				diff = fmt.Sprintf("partition %d: replica %d has %d records below HW %d, leader %d has %d", p, id, got, hw, leader, len(want))
			}
			if diff != "" {
				rep.identical = false
				if rep.why == "" {
					rep.why = diff
				}
				// Count acknowledged leader records this replica lacks.
				seen := map[int64]bool{}
				_ = rr.ReadReplica(topic, int32(p), id, from, hw, func(off int64, v []byte) { seen[off] = true })
				for off, w := range want {
					if !seen[off] && acked(Header{ProducerID: w.pid, Seq: w.seq}) {
						rep.lost++
					}
				}
			}
		}
	}
	return rep
}

// waitReplicated waits (up to d) until every partition with a leader has its HW at the
// leader's LEO, i.e. every record the leaders appended (acks=1 ones included) is committed,
// so the read-back up to the HW sees them. It returns a description of what is still behind.
func waitReplicated(ctx context.Context, ps partitionSampler, topic string, d time.Duration) string {
	return pollUntil(ctx, d, 20*time.Millisecond, func() string {
		ss, err := ps.SamplePartitions(topic)
		if err != nil {
			return err.Error()
		}
		for _, s := range ss {
			if s.Leader < 0 {
				continue
			}
			if leo, ok := s.LEO[s.Leader]; ok && s.HW < leo {
				return fmt.Sprintf("partition %d: HW %d < leader LEO %d", s.Partition, s.HW, leo)
			}
		}
		return ""
	})
}

// pollUntil calls check every interval until it returns "" (then ""), ctx is done or d has
// passed (then check's last answer: what is still not so).
func pollUntil(ctx context.Context, d, every time.Duration, check func() string) string {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		why := check()
		if why == "" {
			return ""
		}
		select {
		case <-ctx.Done():
			return why
		case <-deadline.C:
			return why
		case <-tick.C:
		}
	}
}
