package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnMarker is one transaction marker to write (Kafka's WriteTxnMarkers): end producer id's
// transaction at ProducerEpoch with a COMMIT (Commit) or ABORT control batch in each of
// Partitions, on behalf of the transaction coordinator of CoordinatorEpoch.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// Partitions are the partitions to write to (Topic, Partition); Err and BaseOffset are
	// filled as for a Produce (BaseOffset: the marker's offset).
	Partitions []ProducePartition
}

// AppendTxnMarkers appends each marker to its partitions as leader (acks=all: the
// min.insync.replicas check first, see partition.AppendMarkerAsLeader) and returns the wait
// for the HW to pass them (nil when nothing waits): the caller Waits (or Checks) it, after
// which every partition's Err is final. Safe for concurrent use.
func (b *Broker) AppendTxnMarkers(markers []TxnMarker) []*ProduceWait {
	if b.txnVerify {
		// Under the verification guard (txnverify.go): a batch verified before one of these
		// markers and appended after it would reopen the transaction the marker ends.
		g := &b.txnGuard
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, m := range markers {
			for _, p := range m.Partitions {
				g.markedLocked(txnGuardKey{topic: p.Topic, partition: p.Partition, pid: m.ProducerID})
			}
		}
	}
	var out []*ProduceWait
	usable := b.usable()
	for mi := range markers {
		m := &markers[mi]
		var waits []produceWait
		for i := range m.Partitions {
			p := &m.Partitions[i]
			if usable != nil {
				failProduce(p, usable)
				continue
			}
			h := b.lookup(p.Topic, p.Partition)
			if h == nil {
				failProduce(p, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, p.Topic, p.Partition, b.cfg.ID))
				continue
			}
			info, err := h.r.AppendMarkerAsLeader(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, b.now()/1e6)
			if err != nil {
				failProduce(p, kerrOf(b.storageFailed(err)))
				continue
			}
			p.Err, p.BaseOffset, p.LogAppendTimeMs, p.LogStartOffset = nil, info.FirstOffset, -1, h.r.LogStart()
			waits = append(waits, produceWait{i: i, r: h.r, last: info.LastOffset, epoch: info.LeaderEpoch})
		}
		if len(waits) > 0 {
			out = append(out, &ProduceWait{parts: m.Partitions, waits: waits})
		}
	}
	return out
}
