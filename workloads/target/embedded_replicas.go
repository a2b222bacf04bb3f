package target

import (
	"fmt"

	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
)

// The embedded cluster's parts that read its replicas directly (Inspector): the partition
// samples, the replication readiness and the replica logs.

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
			r, err := e.runningReplica(topic, ps.Partition, id)
			if err != nil {
				continue // stopped, or not hosting it (yet)
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

// readChunk reads the batches from off (inclusive) up to at most to (exclusive), 1 MiB or one
// batch, into *buf; it returns the offset after the last batch read.
func readChunk(r *partition.Replica, off, to int64, buf *[]byte) (int64, error) {
	sl, err := r.Read(off, to, 1<<20, true)
	if err != nil {
		return 0, err
	}
	defer sl.Release()
	if sl.Size == 0 || sl.NextOffset <= off {
		return 0, fmt.Errorf("read at %d returned no progress", off)
	}
	*buf, err = sl.ReadAll((*buf)[:0])
	return sl.NextOffset, err
}

// runningReplica is broker id's replica of the partition, if the broker is running.
func (e *embedded) runningReplica(topic string, p int32, id int32) (*partition.Replica, error) {
	b := e.c.Broker(id)
	if b == nil || e.isStopped(id) {
		return nil, fmt.Errorf("broker %d is not running", id)
	}
	r, ok := b.Replica(topic, p)
	if !ok {
		return nil, fmt.Errorf("broker %d does not host %s-%d", id, topic, p)
	}
	return r, nil
}

func (e *embedded) ReplicaLogStart(topic string, p int32, id int32) (int64, error) {
	r, err := e.runningReplica(topic, p, id)
	if err != nil {
		return 0, err
	}
	return r.LogStart(), nil
}

func (e *embedded) PartitionReplicas(topic string, p int32) (int32, int64, []int32, error) {
	st, ok := e.c.Controller().Partition(topic, p)
	if !ok {
		return -1, 0, nil, fmt.Errorf("no partition %s-%d", topic, p)
	}
	var running []int32
	for _, id := range st.Replicas {
		if !e.isStopped(id) && e.c.Broker(id) != nil {
			running = append(running, id)
		}
	}
	if st.Leader < 0 || e.isStopped(st.Leader) {
		return -1, 0, running, nil
	}
	lr, ok := e.c.Broker(st.Leader).Replica(topic, p)
	if !ok {
		return -1, 0, running, fmt.Errorf("leader %d does not host %s-%d", st.Leader, topic, p)
	}
	return st.Leader, lr.HW(), running, nil
}

func (e *embedded) ReadReplica(topic string, p int32, id int32, from, to int64, fn func(offset int64, value []byte)) error {
	r, err := e.runningReplica(topic, p, id)
	if err != nil {
		return err
	}
	if ls := r.LogStart(); from < ls {
		return fmt.Errorf("broker %d %s-%d: log starts at %d, after %d", id, topic, p, ls, from)
	}
	var buf []byte
	for off := from; off < to; {
		next, err := readChunk(r, off, to, &buf)
		if err != nil {
			return fmt.Errorf("broker %d %s-%d at %d: %w", id, topic, p, off, err)
		}
		err = records.Split(buf, func(batch []byte, h records.Header) error {
			return records.ForEachRecord(batch, func(o, _ int64, _, value []byte) error {
				if o >= off && o < to {
					fn(o, value)
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("broker %d %s-%d in [%d, %d): %w", id, topic, p, off, next, err)
		}
		off = next
	}
	return nil
}
