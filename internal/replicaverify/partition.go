package replicaverify

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyPartition compares the replicas of t: each readable replica is fetched from the
// start offset on, batch by batch, up to its HW, against the leader's log (or the first
// readable replica's when the leader cannot be read).
func verifyPartition(ctx context.Context, cl *kgo.Client, o Options, t target, offs map[replicaKey]offsets) Partition {
	p := Partition{Topic: t.topic, Partition: t.part, Leader: t.leader, From: -1, Verified: -1}
	start := int64(-1)
	for _, b := range t.replicas {
		off := offs[replicaKey{t.topic, t.part, b}]
		r := Replica{Broker: b, Leader: b == t.leader, InISR: slices.Contains(t.isr, b), LogStart: off.start, HW: -1, LEO: off.end, Lag: -1}
		if off.err != nil {
			r.Err = off.err.Error()
		} else {
			start = max(start, off.start)
		}
		p.Replicas = append(p.Replicas, r)
	}
	if leo := leaderLEO(p.Replicas); leo >= 0 {
		for i := range p.Replicas {
			if r := &p.Replicas[i]; r.Err == "" && r.LEO >= 0 {
				r.Lag = max(0, leo-r.LEO)
			}
		}
	}
	if o.Time >= 0 {
		at, err := offsetForTime(ctx, cl, t, o.Time)
		if err != nil {
			for i := range p.Replicas {
				if p.Replicas[i].Err == "" {
					p.Replicas[i].Err = fmt.Sprintf("the offset for time %d: %v", o.Time, err)
				}
			}
			return p
		}
		if at < 0 { // no record at or after the time: nothing to compare
			p.From, p.Verified = leaderLEO(p.Replicas), leaderLEO(p.Replicas)
			return p
		}
		start = max(start, at)
	}
	if f, ok := o.From[TopicPartition{t.topic, t.part}]; ok {
		start = max(start, f)
	}
	var cs []*Cursor
	var idx []int // cs[i] is p.Replicas[idx[i]]
	for i, r := range p.Replicas {
		if r.Err == "" {
			cs = append(cs, &Cursor{Broker: r.Broker, HW: -1, Next: start})
			idx = append(idx, i)
		}
	}
	if len(cs) == 0 {
		return p
	}
	p.From, p.Verified = start, start
	fetchInto := func(i int) bool {
		c := cs[i]
		hw, recs, err := fetch(ctx, cl, o, t, c.Broker, c.Next)
		if err != nil {
			p.Replicas[idx[i]].Err = fmt.Sprintf("fetch at %d: %v", c.Next, err)
			return false
		}
		if c.HW < 0 {
			c.HW = hw // the bound of this pass: the replica's HW when first read
			p.Replicas[idx[i]].HW = hw
		}
		c.Add(recs)
		return true
	}
	kept, keptIdx := cs[:0], idx[:0]
	for i := range cs {
		if fetchInto(i) {
			kept, keptIdx = append(kept, cs[i]), append(keptIdx, idx[i])
		}
	}
	cs, idx = kept, keptIdx // a replica unreadable from the start is left out (Replica.Err)
	if len(cs) == 0 {
		p.From, p.Verified = -1, -1
		return p
	}
	ref := slices.IndexFunc(cs, func(c *Cursor) bool { return c.Broker == t.leader })
	if ref < 0 {
		ref = 0
	}
	for ctx.Err() == nil {
		to, d, done, err := Step(t.topic, t.part, cs, ref)
		switch {
		case errors.Is(err, errNeedMore):
			for i, c := range cs {
				if len(c.Buf) == 0 && !c.Exhausted() && !fetchInto(i) {
					return p // a replica became unreadable: verified up to here
				}
			}
			continue
		case d != nil:
			p.Divergence = d
			return p
		case done:
			return p
		}
		p.Verified = to
		p.Batches++
	}
	return p
}

func leaderLEO(rs []Replica) int64 {
	for _, r := range rs {
		if r.Leader && r.Err == "" {
			return r.LEO
		}
	}
	return -1
}

// fetch reads t's records on broker from offset as the debugging replica: the replica's HW
// and the raw record batches (at most o.FetchBytes, the first batch whole).
func fetch(ctx context.Context, cl *kgo.Client, o Options, t target, broker int32, offset int64) (int64, []byte, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = DebuggingReplicaID
	req.ReplicaState.ID = DebuggingReplicaID // v15+ (KIP-903)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, o.FetchBytes
	req.SessionEpoch = -1 // no fetch session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = t.topic, t.id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = t.part, offset, o.FetchBytes
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
	if err != nil {
		return -1, nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, nil, err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition != t.part {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return -1, nil, err
			}
			return rp.HighWatermark, rp.RecordBatches, nil
		}
	}
	return -1, nil, fmt.Errorf("the broker's answer lacks %s-%d", t.topic, t.part)
}

// offsetForTime asks t's leader for the first offset at or after ts (ms), as a consumer.
func offsetForTime(ctx context.Context, cl *kgo.Client, t target, ts int64) (int64, error) {
	if t.leader < 0 {
		return -1, errors.New("the partition has no leader")
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = t.part, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(t.leader)))
	if err != nil {
		return -1, err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return -1, err
			}
			return rp.Offset, nil // -1: no record at or after ts
		}
	}
	return -1, errors.New("no answer for the partition")
}
