package broker

import (
	"context"
	"fmt"
	"reflect"
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
	var cases []reflect.SelectCase
	var chBuf [maxStaticWait]<-chan struct{}
	defer func() {
		if timer != nil {
			timer.Stop()
			timerPool.Put(timer)
		}
		if replica {
			b.recordLeaderThrottled(parts)
		}
		for i := range parts {
			parts[i].hosted = nil // the caller reuses its partitions: keep no replica alive
		}
	}()
	for {
		total, anyErr, waitChs := b.readPartitions(req, replica, chBuf[:0])
		if anyErr || total >= int64(req.MinBytes) || req.MaxWait <= 0 || len(waitChs) == 0 || !b.running() || ctx.Err() != nil {
			return
		}
		if timer == nil {
			deadline = time.Now().Add(req.MaxWait)
			timer = getTimer(req.MaxWait)
		} else if !time.Now().Before(deadline) {
			return
		}
		// Nothing (enough) yet: drop what we read and park.
		for i := range parts {
			parts[i].Records.Release()
			parts[i].Records = emptySlice
		}
		p0 := time.Now()
		chosen := 3 // 0 the max.wait.ms timer, 1 the request's ctx, 2 the broker closing, 3+ data
		if len(waitChs) <= maxStaticWait {
			// An allocation-free select over up to maxStaticWait channels (nil
			// channels never fire); reflect.Select allocates on every call.
			var w [maxStaticWait]<-chan struct{}
			copy(w[:], waitChs)
			select {
			case <-w[0]:
			case <-w[1]:
			case <-w[2]:
			case <-w[3]:
			case <-w[4]:
			case <-w[5]:
			case <-w[6]:
			case <-w[7]:
			case <-timer.C:
				chosen = 0
			case <-ctx.Done():
				chosen = 1
			case <-b.ctx.Done():
				chosen = 2
			}
		} else {
			cases = cases[:0]
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(b.ctx.Done())})
			for _, ch := range waitChs {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			}
			chosen, _, _ = reflect.Select(cases)
		}
		parked += time.Since(p0)
		switch chosen {
		case 0, 1:
			b.readPartitions(req, replica, chBuf[:0])
			return
		case 2:
			return
		}
	}
}

// maxStaticWait is the number of partition channels a parked Fetch waits on
// with a plain select; more fall back to reflect.Select.
const maxStaticWait = 8

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

// readPartitions reads every partition without an error yet (from a
// previous pass) and returns the total bytes, whether any partition failed,
// and the channels that signal new data (taken before reading, so nothing
// is missed between the read and the park).
func (b *Broker) readPartitions(req *FetchRequest, replica bool, waitChs []<-chan struct{}) (total int64, anyErr bool, _ []<-chan struct{}) {
	waitChs = waitChs[:0]
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1 // still returns the first batch (KIP-74)
	}
	minOne := true
	for i := range req.Partitions {
		p := &req.Partitions[i]
		p.Records.Release()
		p.Records = emptySlice
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
		var ch <-chan struct{}
		if replica {
			ch = r.LEOChanged()
		} else {
			ch = r.HWChanged()
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
		waitChs = append(waitChs, ch)
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
			p.AbortedTransactions = r.AppendAbortedTxns(p.AbortedTransactions, p.FetchOffset, s.NextOffset)
		}
		if s.Size > 0 {
			minOne = false
			budget -= s.Size
			total += s.Size
		}
	}
	return total, anyErr, waitChs
}
