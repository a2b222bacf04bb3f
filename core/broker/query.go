package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
)

// EndOffsetForEpoch answers OffsetForLeaderEpoch on the leader: the largest
// epoch <= epoch this leader knows and its end offset (exclusive; the LEO
// for the current epoch), or (-1, -1) if undefined. currentLeaderEpoch (-1 =
// unchecked) is fenced as in Fetch. Safe for concurrent use.
func (b *Broker) EndOffsetForEpoch(topic string, p int32, currentLeaderEpoch, epoch int32) (int32, int64, error) {
	if err := b.usable(); err != nil {
		return -1, -1, err
	}
	h, err := b.leaderFor(topic, p, currentLeaderEpoch)
	if err != nil {
		return -1, -1, err
	}
	e, end := h.r.EndOffsetForEpoch(epoch)
	return e, end, nil
}

// ListOffsets replica ids (Kafka's ListOffsetsRequest.CONSUMER_REPLICA_ID and
// DEBUGGING_REPLICA_ID).
const (
	consumerReplicaID  = -1
	debuggingReplicaID = -2
)

// ListOffsetFor answers ListOffsets for replicaID, fencing currentLeaderEpoch as Fetch does
// (-1 unchecked), as Kafka's KafkaApis.handleListOffsetRequest and
// Partition.fetchOffsetForTimestamp do: timestamp -2 (EARLIEST) = log start offset
// (inclusive); -1 (LATEST) = for a consumer (replicaID -1) the end of what it may read, the
// HW (exclusive; the LSO for read_committed), for any other
// replicaID (a follower's id >= 0, the debugging id -2) the LEO (Kafka passes no isolation
// level then); a timestamp >= 0 = the first offset below that end whose record timestamp is
// >= it, or -1 when there is none (Kafka answers offset -1 then). Other negative timestamps
// are INVALID_REQUEST. leaderEpoch comes from the same replica, as Kafka's
// fetchOffsetForTimestamp: for LATEST its current leader epoch, otherwise the epoch of the
// batch holding the offset (its epoch cache; -1 unknown or no offset). Only the leader answers, except for the debugging id -2, which any
// replica answers from its own log (Kafka's fetchOnlyFromLeader = false). Safe for
// concurrent use.
func (b *Broker) ListOffsetFor(replicaID int32, currentLeaderEpoch int32, topic string, p int32, timestamp int64, isolation int8) (offset int64, leaderEpoch int32, err error) {
	if err := b.usable(); err != nil {
		return -1, -1, err
	}
	var h *hosted
	if replicaID == debuggingReplicaID {
		h = b.lookup(topic, p)
		if h == nil {
			return -1, -1, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, topic, p, b.cfg.ID)
		}
		err = checkEpoch(h.r, currentLeaderEpoch)
	} else {
		h, err = b.leaderFor(topic, p, currentLeaderEpoch)
	}
	if err != nil {
		return -1, -1, err
	}
	r := h.r
	end := partition.FetchEnd(replicaID != consumerReplicaID, isolation == 1, r.HW(), r.LSO(), r.LEO())
	switch {
	case timestamp == -2:
		ls := r.LogStart()
		return ls, r.Epochs().EpochOf(ls), nil
	case timestamp == -1:
		return end, r.LeaderEpoch(), nil
	case timestamp >= 0:
		off, err := b.offsetForTimestamp(h, timestamp, end)
		if err != nil || off < 0 {
			return off, -1, err
		}
		return off, r.Epochs().EpochOf(off), nil
	default:
		return -1, -1, fmt.Errorf("%w: ListOffsets timestamp %d (want -2, -1 or >= 0)", kerr.InvalidRequest, timestamp)
	}
}

// Partitions returns a snapshot of every replica hosted here, sorted by
// topic and partition. Safe for concurrent use.
func (b *Broker) Partitions() []PartitionInfo {
	hs := b.allReplicas()
	out := make([]PartitionInfo, 0, len(hs))
	for _, h := range hs {
		r := h.r
		st := r.State()
		pi := PartitionInfo{
			Topic: h.key.topic, Partition: h.key.partition,
			IsLeader: r.IsLeader(), Leader: st.Leader, LeaderEpoch: r.LeaderEpoch(),
			Replicas: st.Replicas, ISR: append([]int32(nil), r.ISR()...),
			HW: r.HW(), LEO: r.LEO(), LogStart: r.LogStart(),
		}
		if pi.IsLeader {
			pi.UnderReplicated, pi.UnderMinISR, pi.AtMinISR = health(h)
			pi.FollowerLEOs = make(map[int32]int64, len(st.Replicas))
			for _, id := range st.Replicas {
				if id != b.cfg.ID {
					pi.FollowerLEOs[id] = r.FollowerLEO(id)
				}
			}
		}
		out = append(out, pi)
	}
	return out
}

// Metrics returns the replica-manager metrics now. Safe for concurrent use.
func (b *Broker) Metrics() Metrics {
	m := Metrics{IsrShrinks: b.isrShrinks.Load(), IsrExpands: b.isrExpands.Load()}
	for _, h := range b.allReplicas() {
		m.PartitionCount++
		r := h.r
		if !r.IsLeader() {
			continue
		}
		m.LeaderCount++
		under, underMin, atMin := health(h)
		if under {
			m.UnderReplicatedPartitions++
		}
		if underMin {
			m.UnderMinIsrPartitionCount++
		} else if atMin {
			m.AtMinIsrPartitionCount++
		}
		m.MaxLag = max(m.MaxLag, r.MaxLag())
	}
	for _, l := range b.FetcherLags() {
		m.FetcherMaxLag = max(m.FetcherMaxLag, l.Lag)
	}
	return m
}

// health is a led partition's state as Kafka's Partition gauges give it: under-replicated
// (ISR smaller than the replication factor of the target while reassigning), under
// min.insync.replicas, exactly at it.
func health(h *hosted) (under, underMin, atMin bool) {
	st := h.r.State()
	isr := len(h.r.ISR())
	minISR := h.r.EffectiveMinISR()
	return isr < len(st.Replicas)-len(st.RemovingReplicas), isr < minISR, isr == minISR
}

// offsetForTimestamp scans [logStart, end) in chunks for the first record
// with timestamp >= ts (Kafka's ListOffsets by time, without a time index:
// O(log size), meant for tools). Returns -1 when there is none.
func (b *Broker) offsetForTimestamp(h *hosted, ts int64, end int64) (int64, error) {
	const chunk = 1 << 20
	off := h.r.LogStart()
	var buf []byte
	for off < end {
		s, err := h.r.Read(off, end, chunk, true)
		if err != nil {
			return -1, kerrOf(err)
		}
		if s.Size == 0 {
			s.Release()
			break
		}
		buf, err = s.ReadAll(buf[:0])
		next := s.NextOffset
		s.Release()
		if err != nil {
			return -1, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
		found := int64(-1)
		errFound := errors.New("found")
		err = records.Split(buf, func(batch []byte, hd records.Header) error {
			if hd.MaxTimestamp < ts || hd.NextOffset() <= off {
				return nil
			}
			if hd.Compression() != 0 {
				found = max(hd.BaseOffset, off) // no per-record scan of compressed batches
				return errFound
			}
			return records.ForEachRecord(batch, func(o, t int64, _, _ []byte) error {
				if o >= off && t >= ts {
					found = o
					return errFound
				}
				return nil
			})
		})
		if found >= 0 {
			return found, nil
		}
		if err != nil && !errors.Is(err, errFound) {
			return -1, kerrOf(err)
		}
		if next <= off {
			break
		}
		off = next
	}
	return -1, nil
}
