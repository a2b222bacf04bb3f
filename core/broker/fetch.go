package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
)

// emptySlice is the zero Slice: no records, Release is a no-op.
var emptySlice log.Slice

// Fetch serves a consumer (ReplicaID -1) or replica (ReplicaID >= 0) fetch,
// filling every partition's outputs in place. A consumer reads
// [FetchOffset, HW) from the leader; the debugging consumer (ReplicaID -2, Kafka's
// DEBUGGING_CONSUMER_ID, which ReplicaVerificationTool uses) reads [FetchOffset, HW) of any
// replica, leader or follower, its own HW bounding it; a replica reads [FetchOffset, LEO) and its FetchOffset
// (its LEO) is recorded on the leader first (UpdateFollower), which is what
// advances the HW and may propose an ISR expansion (applied asynchronously
// by the ISR goroutine).
//
// Long poll: when fewer than MinBytes are available and no partition has an
// error, Fetch parks until MaxWait passes, new data arrives (LEO change for
// replica fetches, HW change for consumer fetches), ctx is done or the
// broker stops, then reads again. Per-partition MaxBytes and the request's
// MaxBytes bound the response, except that the first batch of the first
// partition with data is returned even if larger (KIP-74).
//
// The caller must Release every partition's Records (a zero Slice's
// Release is a no-op). Runs on the caller's goroutine; safe for concurrent use.
//
// It returns the time the long poll was parked (Kafka's RemoteTimeMs of a Fetch), which the wire
// server subtracts from the request's time to get the handler's local time.
func (b *Broker) Fetch(ctx context.Context, req *FetchRequest) (parked time.Duration) {
	parts := req.Partitions
	for i := range parts {
		p := &parts[i]
		p.HighWatermark, p.LastStableOffset, p.LogStartOffsetOut = -1, -1, -1
		p.DivergingEpoch, p.DivergingEndOffset = -1, -1
		p.AbortedTransactions = p.AbortedTransactions[:0]
		p.Err = nil
	}
	if err := b.usable(); err != nil {
		for i := range parts {
			parts[i].Err = err
		}
		return
	}
	b.mu.RLock() // one lock for every lookup: a replica fetch may name thousands of partitions
	for i := range parts {
		parts[i].hosted = b.mu.replicas[tp{parts[i].Topic, parts[i].Partition}]
	}
	b.mu.RUnlock()
	replica := req.ReplicaID >= 0
	if replica {
		for i := range parts {
			b.updateFollower(req.ReplicaID, req.ReplicaEpoch, &parts[i])
		}
	}
	var deadline time.Time
	var timer *time.Timer
	var fw *fetchWait // the purgatory registration, taken on the first park
	defer func() {
		if timer != nil {
			timer.Stop()
			timerPool.Put(timer)
		}
		if fw != nil {
			fw.w.Unwatch()
			fetchWaitPool.Put(fw)
		}
		if replica {
			b.recordLeaderThrottled(parts)
		}
		for i := range parts {
			parts[i].hosted = nil // the caller reuses its partitions: keep no replica alive
		}
	}()
	// The first pass reads every partition; while parked, a wake-up re-reads only the
	// partitions whose signal fired (Kafka's DelayedFetch: the bytes available are summed
	// per partition), and the response is read in full once, when the fetch completes.
	total, anyErr := b.readPartitions(req, replica, nil)
	for {
		if anyErr || total >= int64(req.MinBytes) || req.MaxWait <= 0 || !b.running() || ctx.Err() != nil {
			if fw != nil { // a wake-up read only what changed: read the response in full
				b.readPartitions(req, replica, nil)
			}
			return
		}
		if timer == nil {
			deadline = time.Now().Add(req.MaxWait)
			timer = getTimer(req.MaxWait)
		} else if !time.Now().Before(deadline) {
			b.readPartitions(req, replica, nil)
			return
		}
		if fw == nil {
			// Nothing (enough) yet: drop what we read, register with every partition
			// (each with the signal's sequence seen before its read: no lost wake-up) and park.
			fw = getFetchWait(len(parts))
			watched := 0
			for i := range parts {
				p := &parts[i]
				p.Records.Release()
				p.Records = emptySlice
				if p.Err != nil || p.hosted == nil {
					continue
				}
				if replica {
					p.hosted.r.WatchLEO(fw.w, int32(i), p.seq)
				} else {
					p.hosted.r.WatchHW(fw.w, int32(i), p.seq)
				}
				watched++
			}
			if watched == 0 {
				return
			}
		}
		switch b.park(ctx, fw.w.C, timer, &parked) {
		case parkExpired:
			b.readPartitions(req, replica, nil)
			return
		case parkBrokerStopped:
			return
		}
		fw.dirty = fw.w.Dirty(fw.dirty[:0])
		for _, i := range fw.dirty {
			total -= parts[i].avail
		}
		var n int64
		n, anyErr = b.readPartitions(req, replica, fw.dirty)
		total += n
		for _, i := range fw.dirty {
			parts[i].Records.Release()
			parts[i].Records = emptySlice
		}
	}
}

// parkOutcome is how a parked fetch's wait ended (park).
type parkOutcome int

const (
	parkWoken         parkOutcome = iota // a partition it waits on changed
	parkExpired                          // its max wait passed or the request ended: answer what there is
	parkBrokerStopped                    // the broker is closing: no answer
)

// park waits for wake, the timer, the request's end or the broker's, and adds the time it
// waited to *parked (Kafka's RemoteTimeMs of a Fetch).
func (b *Broker) park(ctx context.Context, wake <-chan struct{}, timer *time.Timer, parked *time.Duration) parkOutcome {
	if b.parkedHook != nil {
		b.parkedHook()
	}
	p0 := time.Now()
	defer func() { *parked += time.Since(p0) }()
	select {
	case <-wake:
		return parkWoken
	case <-timer.C:
		return parkExpired
	case <-ctx.Done():
		return parkExpired
	case <-b.ctx.Done():
		return parkBrokerStopped
	}
}

// fetchWait is a parked Fetch's purgatory registration and its scratch, pooled.
type fetchWait struct {
	w     *partition.Waiter
	dirty []int32
}

var fetchWaitPool sync.Pool

func getFetchWait(n int) *fetchWait {
	fw, ok := fetchWaitPool.Get().(*fetchWait)
	if !ok {
		fw = &fetchWait{w: partition.NewWaiter()}
	}
	fw.w.Reset(n)
	return fw
}

// timerPool recycles long-poll timers (a time.Timer per parked Fetch was a
// steady source of garbage). Go 1.23+ timers: Stop + Reset leave no stale
// tick in the channel.
var timerPool sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timerPool.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// updateFollower records a replica fetch's offset on the leader (before any
// read) and queues an ISR expansion when the follower may join.
func (b *Broker) updateFollower(replicaID int32, replicaEpoch int64, p *FetchPartition) {
	h, err := b.checkLeader(p.hosted, p.Topic, p.Partition, p.CurrentLeaderEpoch)
	if err != nil {
		p.Err = err
		return
	}
	join, err := h.r.UpdateFollower(replicaID, replicaEpoch, p.FetchOffset, p.LogStartOffset)
	if err != nil {
		p.Err = kerrOf(err)
		return
	}
	if join {
		b.proposeExpand(h.key, replicaID)
	}
}

// leaderFor finds the replica and checks leadership and the client's
// current leader epoch (-1 = unchecked).
func (b *Broker) leaderFor(topic string, part int32, currentLeaderEpoch int32) (*hosted, error) {
	return b.checkLeader(b.lookup(topic, part), topic, part, currentLeaderEpoch)
}

// checkFetchable checks that p may be read for replicaID: from the leader, or, for the
// debugging consumer (-2), from any replica hosted here (Kafka serves it with
// fetchOnlyFromLeader false), its current leader epoch fenced alike.
func (b *Broker) checkFetchable(replicaID int32, p *FetchPartition) (*hosted, error) {
	if replicaID != debuggingReplicaID {
		return b.checkLeader(p.hosted, p.Topic, p.Partition, p.CurrentLeaderEpoch)
	}
	if p.hosted == nil {
		return nil, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, p.Topic, p.Partition, b.cfg.ID)
	}
	return p.hosted, checkEpoch(p.hosted.r, p.CurrentLeaderEpoch)
}

// checkLeader is leaderFor with the replica already looked up (h nil: not hosted).
func (b *Broker) checkLeader(h *hosted, topic string, part int32, currentLeaderEpoch int32) (*hosted, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, topic, part, b.cfg.ID)
	}
	if err := checkEpoch(h.r, currentLeaderEpoch); err != nil {
		return h, err
	}
	if !h.r.IsLeader() {
		return h, fmt.Errorf("%w: broker %d is not the leader of %s-%d", kerr.NotLeaderForPartition, b.cfg.ID, topic, part)
	}
	return h, nil
}

func checkEpoch(r *partition.Replica, current int32) error {
	if current < 0 {
		return nil
	}
	e := r.LeaderEpoch()
	switch {
	case current < e:
		return fmt.Errorf("%w: request epoch %d < leader epoch %d of %s-%d", kerr.FencedLeaderEpoch, current, e, r.Topic(), r.Partition())
	case current > e:
		return fmt.Errorf("%w: request epoch %d > leader epoch %d of %s-%d", kerr.UnknownLeaderEpoch, current, e, r.Topic(), r.Partition())
	}
	return nil
}

// readPartitions reads every partition (only nil) or the partitions of the indexes in only,
// those without an error yet (from a previous pass), and returns the total bytes and whether
// any partition failed. Each partition read keeps its bytes (avail) and the sequence of the
// signal that announces its new data (seq, taken before reading: nothing is missed between
// the read and the park).
func (b *Broker) readPartitions(req *FetchRequest, replica bool, only []int32) (total int64, anyErr bool) {
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1 // still returns the first batch (KIP-74)
	}
	minOne := true
	n := len(req.Partitions)
	if only != nil {
		n = len(only)
	}
	for k := 0; k < n; k++ {
		i := k
		if only != nil {
			i = int(only[k])
		}
		p := &req.Partitions[i]
		p.Records.Release()
		p.Records = emptySlice
		p.avail = 0
		if p.Err != nil { // from updateFollower
			anyErr = true
			continue
		}
		h, err := b.checkFetchable(req.ReplicaID, p)
		if err != nil {
			p.Err = err
			anyErr = true
			continue
		}
		r := h.r
		if replica {
			p.seq = r.LEOSeq()
		} else {
			p.seq = r.HWSeq()
		}
		hw, logStart, leo := r.HW(), r.LogStart(), r.LEO()
		lso := r.LSO()
		p.HighWatermark, p.LastStableOffset, p.LogStartOffsetOut = hw, lso, logStart
		p.AbortedTransactions = p.AbortedTransactions[:0]
		end := partition.FetchEnd(replica, req.IsolationLevel == 1, hw, lso, leo)
		if p.FetchOffset < logStart || p.FetchOffset > leo {
			p.Err = fmt.Errorf("%w: fetch offset %d outside [%d, %d] of %s-%d", kerr.OffsetOutOfRange, p.FetchOffset, logStart, leo, p.Topic, p.Partition)
			anyErr = true
			continue
		}
		if p.FetchOffset >= end {
			continue
		}
		if replica && b.leaderThrottles(h, req.ReplicaID) {
			continue // no records this time (quota.go)
		}
		limit := min(int64(p.MaxBytes), budget)
		if limit <= 0 && !minOne {
			continue
		}
		s, err := r.Read(p.FetchOffset, end, int(max(limit, 0)), minOne)
		if err != nil {
			p.Err = kerrOf(b.storageFailed(err))
			anyErr = true
			continue
		}
		p.Records = s
		if s.Size > 0 && !replica && req.IsolationLevel == 1 {
			var err error
			if p.AbortedTransactions, err = r.AppendAbortedTxns(p.AbortedTransactions, p.FetchOffset, s.NextOffset); err != nil {
				s.Release()
				p.Records = log.Slice{}
				p.Err = kerrOf(b.storageFailed(err))
				anyErr = true
				continue
			}
		}
		p.avail = s.Size
		if s.Size > 0 {
			minOne = false
			budget -= s.Size
			total += s.Size
		}
	}
	return total, anyErr
}
