package workloads

import (
	"context"
	"time"

	"github.com/isrbench/isrbench/results"
)

// verdict is what verify found.
type verdict struct {
	// readFrom is where the read-back started in each partition: the HW before the load, or
	// the log start where retention deleted past it.
	readFrom []int64
	dc       results.DurabilityCounts
	byAcks   map[string]results.DurabilityCounts
	// err is set when the read-back could not finish (the counts are then incomplete).
	err      error
	replicas replicaVerdict
}

// verify reads back every partition from the HW before the load to its end offset after it
// and checks each acknowledged record is there once and in order (checkDurability), then
// compares the replica logs where the target can read them.
func (r *run) verify(ctx context.Context, st settled) (*verdict, error) {
	s := r.spec
	startOffs := r.plan.startOffs
	// Retention may have deleted the oldest acknowledged records: settle it (embedded), then
	// read back from the log start where it is past the offsets listed before the load.
	if ra := r.parts.Retention; ra != nil {
		ra.ApplyRetention()
	}
	logStarts, err := listOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, false)
	if err != nil {
		return nil, err
	}
	v := &verdict{readFrom: make([]int64, len(startOffs))}
	for p := range startOffs {
		v.readFrom[p] = max(startOffs[p], min(logStarts[p], st.endOffs[p]))
	}
	verifyCtx, cancelVerify := context.WithTimeout(ctx, 60*time.Second)
	v.dc, v.byAcks, v.err = checkDurability(verifyCtx, r.plan.seeds, s.Topic.Name, startOffs, v.readFrom, st.endOffs, r.prods)
	cancelVerify()
	if v.err != nil {
		r.notef("durability check: %v", v.err)
	}
	if after, err := listOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, false); err == nil {
		for p := range after {
			if after[p] > v.readFrom[p] {
				r.notef("durability check: log start of partition %d moved from %d to %d during the read-back (retention): records between may count as lost", p, v.readFrom[p], after[p])
			}
		}
	}
	v.replicas = r.checkReplicas(v.readFrom)
	return v, nil
}

// replicaVerdict is the comparison of the replica logs: bytes (every ISR member's log
// byte-identical to the leader's up to the HW) and records (every running replica holds the
// leader's records, none of the acknowledged ones missing). A part the target cannot check is
// left unset.
type replicaVerdict struct {
	bytesChecked bool
	bytesSame    bool
	bytesWhy     string
	bytesErr     error
	logs         *replicaReport
}

// checkReplicas compares the replica logs of the topic (where the target can read them), from
// readFrom (the read-back's start) for the records.
func (r *run) checkReplicas(readFrom []int64) replicaVerdict {
	var v replicaVerdict
	topic := r.spec.Topic.Name
	rr := r.parts.Replicas
	if rr == nil {
		return v
	}
	{
		same, why, err := rr.ReplicasIdentical(topic)
		switch {
		case err != nil:
			r.notef("replica comparison: %v", err)
		case !same:
			r.notef("replicas differ: %s", why)
		}
		v.bytesChecked, v.bytesSame, v.bytesWhy, v.bytesErr = true, same, why, err
	}
	{
		rep := checkReplicaLogs(rr, topic, readFrom, r.prods)
		if rep.err != nil {
			r.notef("replica logs: %v", rep.err)
		}
		if !rep.identical {
			r.notef("replica logs differ: %s", rep.why)
		}
		v.logs = &rep
	}
	return v
}

// apply records the verdict in res and the faults report.
func (v replicaVerdict) apply(res *results.Result, fr *FaultsReport) {
	if v.bytesChecked {
		if !v.bytesSame && v.bytesErr == nil {
			res.Note("durability.replicas", v.bytesWhy)
		}
		res.Durability.ReplicasIdentical = v.bytesSame
	}
	if v.logs != nil {
		v.logs.apply(res, fr)
	}
}
