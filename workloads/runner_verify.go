package workloads

import (
	"context"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// verdict is what verify found.
type verdict struct {
	// readFrom is where the read-back started in each partition (inclusive): the HW before
	// the load, or the log start where retention deleted past it.
	readFrom []int64
	dc       results.DurabilityCounts
	byAcks   map[string]results.DurabilityCounts
	// err is set when the read-back could not finish (the counts are then incomplete).
	err      error
	replicas *replicaReport // nil: the target cannot read its replicas
}

// verify reads back every partition from the HW before the load to its end offset after it
// and checks each acknowledged record is there once and in order (checkDurability), then
// compares the replica logs where the target can read them.
func (r *rig) verify(ctx context.Context, st settled) (*verdict, error) {
	s := r.spec
	startOffs := r.plan.startOffs
	// Retention may have deleted the oldest acknowledged records: settle it (embedded), then
	// read back from the log start where it is past the offsets listed before the load.
	if ra := r.parts.Retention; ra != nil {
		ra.ApplyRetention()
	}
	logStarts, err := target.ListOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, false)
	if err != nil {
		return nil, err
	}
	v := &verdict{readFrom: make([]int64, len(startOffs))}
	for p := range startOffs {
		v.readFrom[p] = max(startOffs[p], min(logStarts[p], st.endOffs[p]))
	}
	verifyCtx, cancelVerify := context.WithTimeout(ctx, 60*time.Second)
	v.dc, v.byAcks, v.err = load.CheckDurability(verifyCtx, r.plan.conn, s.Topic.Name, startOffs, v.readFrom, st.endOffs, r.prods)
	cancelVerify()
	if v.err != nil {
		r.notef("durability check: %v", v.err)
	}
	if after, err := target.ListOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, false); err == nil {
		for p := range after {
			if after[p] > v.readFrom[p] {
				r.notef("durability check: log start of partition %d moved from %d to %d during the read-back (retention): records between may count as lost", p, v.readFrom[p], after[p])
			}
		}
	}
	v.replicas = r.checkReplicas(v.readFrom)
	return v, nil
}

// replicaReport is the verdict of the replica comparison after the run: the bytes (every ISR
// member's log byte-identical to the leader's up to the HW: durability.replicas_identical)
// and the records (every running replica holds the leader's records from the read-back's
// start, none of the acknowledged ones missing: faults.json replica_logs).
type replicaReport struct {
	bytesSame bool
	bytesWhy  string
	bytesErr  error

	identical bool
	why       string
	checked   int   // replica logs read
	lost      int64 // acknowledged records below the HW missing from some running replica's log
	err       error
}

// checkReplicas compares the replica logs of the topic where the target can read them (nil
// when it cannot); the records from readFrom (the read-back's start).
func (r *rig) checkReplicas(readFrom []int64) *replicaReport {
	rr := r.parts.Replicas
	if rr == nil {
		return nil
	}
	topic := r.spec.Topic.Name
	same, why, err := rr.ReplicasIdentical(topic)
	switch {
	case err != nil:
		r.notef("replica comparison: %v", err)
	case !same:
		r.notef("replicas differ: %s", why)
	}
	rep := checkReplicaLogs(rr, topic, readFrom, r.prods)
	rep.bytesSame, rep.bytesWhy, rep.bytesErr = same, why, err
	if rep.err != nil {
		r.notef("replica logs: %v", rep.err)
	}
	if !rep.identical {
		r.notef("replica logs differ: %s", rep.why)
	}
	return &rep
}

// apply records the verdict in res and the faults report (nothing when rep is nil: the
// target cannot read its replicas).
func (rep *replicaReport) apply(res *results.Result, fr *FaultsReport) {
	if rep == nil {
		return
	}
	if !rep.bytesSame && rep.bytesErr == nil {
		res.Note("durability.replicas", rep.bytesWhy)
	}
	res.Durability.ReplicasIdentical = rep.bytesSame && rep.identical
	fr.ReplicaLogs = &ReplicaLogs{Checked: rep.checked, Lost: rep.lost, Identical: rep.identical, Note: rep.why}
	if rep.err != nil {
		fr.ReplicaLogs.Error = rep.err.Error()
	}
	if !rep.identical {
		res.Note("durability.replica_logs", rep.why)
	}
}

// checkReplicaLogs reads every partition from start[p] (inclusive; or from the latest log
// start of its replicas where retention deleted past it) to the leader's HW
// (exclusive) from the leader's log and from every running replica's log, parsing the
// batches, and checks that each replica holds the same records (offset, producer id, seq) as
// the leader, and that no acknowledged record of the leader's range is missing on a replica.
func checkReplicaLogs(rr target.ReplicaReader, topic string, start []int64, prods []*load.Producer) replicaReport {
	rep := replicaReport{identical: true}
	type rec struct {
		pid uint32
		seq uint64
	}
	acked := func(h load.Header) bool {
		for _, p := range prods {
			if p.ID == h.ProducerID {
				return p.HasAcked(h.Seq)
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
			h, _ := load.ParseHeader(v)
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
				h, _ := load.ParseHeader(v)
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
					if !seen[off] && acked(load.Header{ProducerID: w.pid, Seq: w.seq}) {
						rep.lost++
					}
				}
			}
		}
	}
	return rep
}
