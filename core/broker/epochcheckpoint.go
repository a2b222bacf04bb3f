package broker

import "github.com/isrbench/isrbench/core/log"

// epochCheckpoints writes the leader-epoch checkpoints of new epochs for every broker of the
// process (Config.EpochCheckpointAsync), one file at a time: a topic of thousands of
// partitions elects thousands of leaders and its followers' first fetched batches assign
// thousands of epochs, and each write creates a file (the checkpoint is replaced by a
// rename). Queued, they are made off the controller batch and the fetchers' appends. A full
// queue makes the write where the epoch was assigned, as without it. A closed replica's
// write does nothing (partition.EpochCache.Close wrote it), and so does a killed broker's
// (Replica.Abandon).
var epochCheckpoints = log.JobQueue{Workers: 1, Size: 1 << 16}

// epochCheckpointLater is the replicas' partition.Config.EpochCheckpointLater, nil when
// Config.EpochCheckpointAsync is off. With Config.Manual the writes wait for
// WritePendingEpochCheckpoints. A failed write is handled as where the epoch is assigned:
// logged, and a storage error takes the log directory offline (a resource error, no
// descriptor left, leaves the cache stale: its next change writes it durably).
func (b *Broker) epochCheckpointLater() func(write func() error) bool {
	switch {
	case !b.cfg.EpochCheckpointAsync:
		return nil
	case b.cfg.Manual:
		return func(write func() error) bool {
			b.epochQ.Lock()
			b.epochQ.pending = append(b.epochQ.pending, write)
			b.epochQ.Unlock()
			return true
		}
	}
	return func(write func() error) bool {
		return epochCheckpoints.Offer(func() { b.epochCheckpointDone(write()) })
	}
}

func (b *Broker) epochCheckpointDone(err error) {
	if err != nil {
		b.logf("broker %d: %v", b.cfg.ID, b.storageFailed(err))
	}
}

// WritePendingEpochCheckpoints makes the leader-epoch checkpoint writes queued so far, on the
// caller's goroutine, for a broker with Config.Manual (the queue's work); it returns how many
// it ran. A broker killed before they run loses them, as a killed process does.
func (b *Broker) WritePendingEpochCheckpoints() int {
	b.epochQ.Lock()
	list := b.epochQ.pending
	b.epochQ.pending = nil
	b.epochQ.Unlock()
	for _, write := range list {
		b.epochCheckpointDone(write())
	}
	return len(list)
}
