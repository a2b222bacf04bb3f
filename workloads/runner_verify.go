package workloads

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/internal/replicaverify"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// verify reads back every partition from the HW before the load to its end offset after it
// and checks each acknowledged record is there once and in order (checkDurability), then
// compares the replica logs where the target can read them.
func verify(ctx context.Context, in *runInput, p *prepared, st *settled) (*verified, error) {
	s, t := in.spec, p.tgt
	startOffs := p.startOffs
	// Retention may have deleted the oldest acknowledged records: settle it (embedded), then
	// read back from the log start where it is past the offsets listed before the load.
	if ra := t.parts.Retention; ra != nil {
		ra.ApplyRetention()
	}
	logStarts, err := target.ListOffsets(ctx, t.adm, s.Topic.Name, s.Topic.Partitions, false)
	if err != nil {
		return nil, err
	}
	v := &verified{readFrom: make([]int64, len(startOffs))}
	for i := range startOffs {
		v.readFrom[i] = max(startOffs[i], min(logStarts[i], st.endOffs[i]))
	}
	verifyCtx, cancelVerify := context.WithTimeout(ctx, 60*time.Second)
	v.dc, v.byAcks, v.err = load.CheckDurability(verifyCtx, t.conn, s.Topic.Name, startOffs, v.readFrom, st.endOffs, p.cl.prods)
	cancelVerify()
	if v.err != nil {
		in.notef("durability check: %v", v.err)
	}
	if after, err := target.ListOffsets(ctx, t.adm, s.Topic.Name, s.Topic.Partitions, false); err == nil {
		for i := range after {
			if after[i] > v.readFrom[i] {
				in.notef("durability check: log start of partition %d moved from %d to %d during the read-back (retention): records between may count as lost", i, v.readFrom[i], after[i])
			}
		}
	}
	v.txn = verifyTxn(ctx, in, p, st, v.readFrom)
	v.replicas = checkReplicas(ctx, in, t, p.cl.prods, v.readFrom)
	return v, nil
}

// checkReplicas compares the replicas of the topic: their bytes through replicaverify on
// every target, their records where the target can read its replica logs; the records from
// readFrom (the read-back's start).
func checkReplicas(ctx context.Context, in *runInput, t *openTarget, prods []*load.Producer, readFrom []int64) *replicaReport {
	rep := &replicaReport{identical: true}
	topic := in.spec.Topic.Name
	rr := t.parts.Replicas
	verifyReplicaBytes(ctx, t.conn, topic, rep, rr)
	switch {
	case rep.bytesErr != nil:
		in.notef("replica comparison: %v", rep.bytesErr)
	case !rep.bytesSame:
		in.notef("replicas differ: %s", rep.bytesWhy)
	}
	if rr == nil {
		return rep
	}
	rep.records = true
	checkReplicaLogs(rr, topic, readFrom, prods, rep)
	if rep.err != nil {
		in.notef("replica logs: %v", rep.err)
	}
	if !rep.identical {
		in.notef("replica logs differ: %s", rep.why)
	}
	return rep
}

// verifyReplicaBytes runs replicaverify over the topic (the debugging replica id -2 on every
// replica). A replica it could not read is skipped when its broker is stopped (the fault
// schedule's, as rr reports running replicas) or out of the ISR; an ISR member of a running
// broker it could not read leaves the replicas unverified (replicas_identical false).
func verifyReplicaBytes(ctx context.Context, conn []kgo.Opt, topic string, rep *replicaReport, rr target.ReplicaReader) {
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		rep.bytesErr = fmt.Errorf("replica comparison: client: %w", err)
		return
	}
	defer cl.Close()
	vctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	vr, err := replicaverify.Verify(vctx, cl, replicaverify.Options{Topics: regexp.MustCompile("^" + regexp.QuoteMeta(topic) + "$")})
	if err != nil {
		rep.bytesErr = err
		return
	}
	var why, skipped []string
	from, verified, parts, notServed := int64(-1), int64(-1), 0, 0
	for _, p := range vr.Partitions {
		if d := p.Divergence; d != nil {
			// replicas_identical speaks of the ISR: a replica out of it (a restarted broker
			// not yet truncated after an unclean election) is reported, not counted.
			if inISR(p, d.Replica) {
				why = append(why, d.String())
			} else {
				skipped = append(skipped, d.String()+" (out of the ISR)")
			}
		}
		var running map[int32]bool
		if rr != nil {
			if _, _, ids, err := rr.PartitionReplicas(p.Topic, p.Partition); err == nil {
				running = map[int32]bool{}
				for _, id := range ids {
					running[id] = true
				}
			}
		}
		for _, rp := range p.Replicas {
			if rp.Err == "" {
				continue
			}
			desc := fmt.Sprintf("%s-%d replica %d", p.Topic, p.Partition, rp.Broker)
			switch {
			case running != nil && !running[rp.Broker]:
				skipped = append(skipped, desc+" (broker stopped)")
			case !rp.InISR:
				skipped = append(skipped, desc+" (out of the ISR: "+rp.Err+")")
			case strings.Contains(rp.Err, "NOT_LEADER_FOR_PARTITION"):
				// The cluster serves the debugging replica id from leaders only (kfake).
				notServed++
			default:
				why = append(why, desc+" (ISR member) not checked: "+rp.Err)
			}
		}
		if p.From >= 0 && p.Verified >= 0 {
			parts++
			from, verified = minKnown(from, p.From), max(verified, p.Verified)
		}
	}
	if notServed > 0 {
		why = append(why, fmt.Sprintf("%d ISR replicas not compared: the cluster serves the debugging replica id (-2) from leaders only (NOT_LEADER_FOR_PARTITION)", notServed))
	}
	rep.bytesSame = len(why) == 0
	rep.bytesWhy = strings.Join(why, "; ")
	rep.checked = fmt.Sprintf("replicaverify: %d of %d partitions compared batch by batch up to each replica's HW, offsets within [%d, %d)",
		parts, len(vr.Partitions), max(from, 0), max(verified, 0))
	if len(skipped) > 0 {
		rep.checked += "; not read: " + strings.Join(skipped, ", ")
	}
	if parts < len(vr.Partitions) && rep.bytesSame {
		rep.bytesSame = false
		rep.bytesWhy = fmt.Sprintf("%d of %d partitions could not be compared (no replica readable)", len(vr.Partitions)-parts, len(vr.Partitions))
	}
}

// inISR reports whether broker id's replica of p is in the ISR.
func inISR(p replicaverify.Partition, id int32) bool {
	for _, rp := range p.Replicas {
		if rp.Broker == id {
			return rp.InISR
		}
	}
	return false
}

// minKnown is min(a, b) where a < 0 means unknown.
func minKnown(a, b int64) int64 {
	if a < 0 {
		return b
	}
	return min(a, b)
}

// apply records the verdict in res and the faults report.
func (rep *replicaReport) apply(res *results.Result, fr *FaultsReport) {
	if rep == nil {
		return
	}
	switch {
	case rep.bytesErr != nil:
		res.Note("durability.replicas", "not compared: "+rep.bytesErr.Error())
	case !rep.bytesSame:
		res.Note("durability.replicas", rep.bytesWhy)
	}
	if rep.checked != "" {
		res.Note("durability.replicas_checked", rep.checked)
	}
	res.Durability.ReplicasIdentical = rep.bytesErr == nil && rep.bytesSame && rep.identical
	if !rep.records {
		return
	}
	fr.ReplicaLogs = &ReplicaLogs{Checked: rep.nlogs, Lost: rep.lost, Identical: rep.identical, Note: rep.why}
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
func checkReplicaLogs(rr target.ReplicaReader, topic string, start []int64, prods []*load.Producer, rep *replicaReport) {
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
		rep.nlogs++
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
			rep.nlogs++
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
}
