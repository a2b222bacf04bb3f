package workloads

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
)

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
		ft.FailedProduces = pt.failedBetween(f.AtS, until)
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

// failedBetween counts failed records whose intended send time lies in [from, to] seconds
// after the start of measurement.
func (pt *partTimeline) failedBetween(from, to float64) int64 {
	lo := pt.start.UnixNano() + int64(from*1e9)
	hi := pt.start.UnixNano() + int64(to*1e9)
	return load.FailedBetween(pt.prods, lo, hi)
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
