package broker

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/isrbench/isrbench/core/partition"
)

// FetchSession is the leader's side of one incremental fetch session's partitions (KIP-227):
// the request fields the client last sent for each, the response fields it last heard, and a
// subscription to each replica's changes (partition.Replica.Subscribe) under the partition's
// slot. A fetch on it (Broker.SessionFetch) visits only the partitions that changed since the
// previous fetch (their slot marked dirty), were named by the request, or are not quiet (an
// error, data left to read, a follower outside the ISR): an idle partition costs nothing per
// fetch, and a parked fetch is woken by the partitions that changed, whatever their number.
//
// Kafka's semantics hold: a follower's fetch records every session partition on the leader
// (the quiet followers through the session's partition.FetchClock), and the response carries
// every partition whose HW, LSO, log start, error or records changed (a change fires one of
// the signals the session subscribes to).
//
// Safe for concurrent use: its methods serialise on one mutex, held through a fetch (a
// session's fetches run one at a time, as its epochs require). Close it when the session ends.
type FetchSession struct {
	b         *Broker
	replica   bool  // a follower's session: replica fetches (parks on LEO changes)
	replicaID int32 // the follower of a replica session (its first fetch's), else -1

	mu      sync.Mutex
	w       *partition.Waiter // index: slot
	clock   partition.FetchClock
	slots   []sessionSlot
	free    []int32
	index   map[tp]int32
	pending []int32 // slots visited by the next fetch whatever their signals (slot.pending)
	visit   []int32 // this fetch's slots, parallel to the request's partitions
	dirty   []int32 // scratch
	quiet   []bool  // scratch: parallel to visit, the follower is quiet
	closed  bool
	level   int8 // the isolation level of the last fetch (-1 none): quiet depends on it
}

// sessionSlot is one partition of a session.
type sessionSlot struct {
	key                tp
	live               bool
	pending            bool
	inReq              int32 // index in this fetch's request partitions, -1 when not in it
	fetchOffset        int64
	currentLeaderEpoch int32
	logStartOffset     int64
	maxBytes           int32
	// The response fields the client last heard (hw -1 after an error: sent again).
	hw, lso, logStart int64
	sub               *hosted // the replica subscribed to, nil: none
}

// NewFetchSession returns an empty session for a follower's replica fetches (replica) or a
// consumer's fetches.
func (b *Broker) NewFetchSession(replica bool) *FetchSession {
	return &FetchSession{b: b, replica: replica, replicaID: -1, level: -1, w: partition.NewWaiter(), index: map[tp]int32{}}
}

// Len is the number of partitions in the session.
func (s *FetchSession) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}

// Set adds p to the session or updates its request fields (FetchOffset, CurrentLeaderEpoch,
// LogStartOffset, MaxBytes); the next fetch visits it. A new partition's response fields are
// unknown (it is in the next response) unless heard: then p's outputs (HighWatermark,
// LastStableOffset, LogStartOffsetOut, Err) are what the client heard in a full response.
func (s *FetchSession) Set(p *FetchPartition, heard bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tp{p.Topic, p.Partition}
	i, ok := s.index[k]
	if !ok {
		if n := len(s.free); n > 0 {
			i, s.free = s.free[n-1], s.free[:n-1]
		} else {
			i = int32(len(s.slots))
			s.slots = append(s.slots, sessionSlot{})
			s.w.Grow(len(s.slots))
		}
		s.slots[i] = sessionSlot{key: k, live: true, inReq: -1, hw: -1, lso: -1, logStart: -1}
		s.index[k] = i
		if heard {
			s.slots[i].noteResponse(p)
		}
	}
	sl := &s.slots[i]
	sl.fetchOffset, sl.currentLeaderEpoch = p.FetchOffset, p.CurrentLeaderEpoch
	sl.logStartOffset, sl.maxBytes = p.LogStartOffset, p.MaxBytes
	s.markPending(i)
}

// Forget removes a partition from the session (a request's forgotten topics).
func (s *FetchSession) Forget(topic string, part int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[tp{topic, part}]
	if !ok {
		return
	}
	delete(s.index, tp{topic, part})
	sl := &s.slots[i]
	s.unsubscribe(sl)
	*sl = sessionSlot{inReq: -1}
	s.free = append(s.free, i) // a stale mark on it costs one spurious visit
}

// Close ends the session: every subscription is removed.
func (s *FetchSession) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for i := range s.slots {
		s.unsubscribe(&s.slots[i])
	}
}

// unsubscribe drops sl's subscription, and the session's clock from its follower's progress
// (the session speaks for it no more).
func (s *FetchSession) unsubscribe(sl *sessionSlot) {
	if sl.sub == nil {
		return
	}
	sl.sub.r.Unsubscribe(s.w)
	if s.replicaID >= 0 {
		sl.sub.r.Unquiet(s.replicaID, &s.clock)
	}
	sl.sub = nil
}

func (s *FetchSession) markPending(i int32) {
	if !s.slots[i].pending {
		s.slots[i].pending = true
		s.pending = append(s.pending, i)
	}
}

// noteResponse records what a response tells the client about p and reports whether an
// incremental response must carry it (Kafka's CachedPartition.maybeUpdateResponseData).
func (sl *sessionSlot) noteResponse(p *FetchPartition) bool {
	if p.Err != nil {
		sl.hw = -1 // sent again once the error is gone
		return true
	}
	must := p.Records.Size > 0
	if sl.hw != p.HighWatermark {
		sl.hw, must = p.HighWatermark, true
	}
	if sl.lso != p.LastStableOffset {
		sl.lso, must = p.LastStableOffset, true
	}
	if sl.logStart != p.LogStartOffsetOut {
		sl.logStart, must = p.LogStartOffsetOut, true
	}
	return must
}

// SessionFetch runs an incremental fetch on session s (req's fields but Partitions: MaxWait,
// MinBytes, MaxBytes, IsolationLevel, ReplicaID, ReplicaEpoch) as Fetch does over the
// session's partitions, visiting only those that changed, were set since the last fetch, or
// are not quiet (FetchSession). It leaves in req.Partitions the partitions the response must
// carry, sorted by topic and partition; the caller releases their Records. It returns the
// time the long poll was parked.
func (b *Broker) SessionFetch(ctx context.Context, s *FetchSession, req *FetchRequest) (parked time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	replica := req.ReplicaID >= 0
	if replica {
		s.replicaID = req.ReplicaID
	}
	req.Partitions = req.Partitions[:0]
	s.visit = s.visit[:0]
	startNs := b.now()
	uerr := b.usable()
	if uerr != nil || req.IsolationLevel != s.level {
		// Every partition answers the broker's error; or a new isolation level reads up to
		// another end (the HW or the LSO): what was quiet may not be.
		s.level = req.IsolationLevel
		for i := range s.slots {
			if s.slots[i].live {
				s.markPending(int32(i))
			}
		}
	}
	for _, i := range s.pending {
		s.slots[i].pending = false
		s.add(req, i)
	}
	s.pending = s.pending[:0]
	s.dirty = s.w.Dirty(s.dirty[:0])
	for _, i := range s.dirty {
		s.add(req, i)
	}
	first := len(req.Partitions) // the partitions added while parked follow
	if cap(s.quiet) < first {
		s.quiet = make([]bool, first, 2*first)
	}
	quiet := s.quiet[:first]
	clear(quiet)
	if uerr != nil {
		for k := range req.Partitions {
			req.Partitions[k].Err = uerr
		}
		s.respond(req, first, replica, quiet)
		return 0
	}
	s.resolve(req, 0)
	if replica {
		for k := range req.Partitions {
			quiet[k] = b.updateFollowerQuiet(req.ReplicaID, req.ReplicaEpoch, &req.Partitions[k], &s.clock)
		}
		s.clock.Tick(startNs) // every quiet partition was recorded at startNs
	}
	var deadline time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
			timerPool.Put(timer)
		}
		if replica {
			b.recordLeaderThrottled(req.Partitions)
		}
		s.respond(req, first, replica, quiet)
	}()
	total, anyErr := b.readPartitions(req, replica, nil)
	for {
		if anyErr || total >= int64(req.MinBytes) || req.MaxWait <= 0 || !b.running() || ctx.Err() != nil {
			b.readPartitions(req, replica, nil)
			return
		}
		if timer == nil {
			deadline = time.Now().Add(req.MaxWait)
			timer = getTimer(req.MaxWait)
			for k := range req.Partitions { // parked: hold no file slice (a wake-up's reads release theirs)
				req.Partitions[k].Records.Release()
				req.Partitions[k].Records = emptySlice
			}
		} else if !time.Now().Before(deadline) {
			b.readPartitions(req, replica, nil)
			return
		}
		switch b.park(ctx, s.w.C, timer, &parked) {
		case parkExpired:
			b.readPartitions(req, replica, nil)
			return
		case parkBrokerStopped:
			return
		}
		s.dirty = s.w.Dirty(s.dirty[:0])
		only := s.dirty[:0] // request indexes to read again, in place of the slots
		for _, i := range s.dirty {
			if !s.slots[i].live {
				continue
			}
			k := s.slots[i].inReq
			if k < 0 {
				k = s.add(req, i)
				s.resolve(req, int(k))
			} else {
				total -= req.Partitions[k].avail
			}
			only = append(only, k)
		}
		var n int64
		n, anyErr = b.readPartitions(req, replica, only)
		total += n
		for _, k := range only {
			req.Partitions[k].Records.Release()
			req.Partitions[k].Records = emptySlice
		}
		s.dirty = only[:0]
	}
}

// add appends slot i to the fetch unless it is in it or gone, and returns its index (-1).
func (s *FetchSession) add(req *FetchRequest, i int32) int32 {
	sl := &s.slots[i]
	if !sl.live || sl.inReq >= 0 {
		return sl.inReq
	}
	sl.inReq = int32(len(req.Partitions))
	s.visit = append(s.visit, i)
	req.Partitions = append(req.Partitions, FetchPartition{
		Topic: sl.key.topic, Partition: sl.key.partition, FetchOffset: sl.fetchOffset,
		CurrentLeaderEpoch: sl.currentLeaderEpoch, LogStartOffset: sl.logStartOffset, MaxBytes: sl.maxBytes,
		HighWatermark: -1, LastStableOffset: -1, LogStartOffsetOut: -1, DivergingEpoch: -1, DivergingEndOffset: -1,
	})
	return sl.inReq
}

// resolve looks up the replicas of req.Partitions[from:] and subscribes the session to each
// (before its first read: no change is missed), replacing a subscription to a replica that
// is not hosted any more.
func (s *FetchSession) resolve(req *FetchRequest, from int) {
	b := s.b
	b.mu.RLock()
	for k := from; k < len(req.Partitions); k++ {
		p := &req.Partitions[k]
		p.hosted = b.mu.replicas[tp{p.Topic, p.Partition}]
	}
	b.mu.RUnlock()
	for k := from; k < len(req.Partitions); k++ {
		h := req.Partitions[k].hosted
		sl := &s.slots[s.visit[k]]
		if sl.sub == h || s.closed {
			continue
		}
		s.unsubscribe(sl)
		sl.sub = h
		if h != nil {
			h.r.Subscribe(s.w, s.visit[k], s.replica)
		}
	}
}

// updateFollowerQuiet is updateFollower for a session partition: it reports whether the
// follower is quiet on it (partition.Replica.UpdateFollowerQuiet).
func (b *Broker) updateFollowerQuiet(replicaID int32, replicaEpoch int64, p *FetchPartition, clock *partition.FetchClock) bool {
	h, err := b.checkLeader(p.hosted, p.Topic, p.Partition, p.CurrentLeaderEpoch)
	if err != nil {
		p.Err = err
		return false
	}
	join, quiet, err := h.r.UpdateFollowerQuiet(replicaID, replicaEpoch, p.FetchOffset, p.LogStartOffset, clock)
	if err != nil {
		p.Err = kerrOf(err)
		return false
	}
	if join {
		b.proposeExpand(h.key, replicaID)
	}
	return quiet
}

// respond ends a session fetch: each visited partition's response is recorded, the ones the
// client must hear about are kept in req.Partitions (sorted), and the ones that are not quiet
// are visited again by the next fetch. The partitions from index first on were added while
// parked (not recorded on the leader this time): they are visited again too.
func (s *FetchSession) respond(req *FetchRequest, first int, replica bool, quiet []bool) {
	kept := req.Partitions[:0]
	for k := range req.Partitions {
		p := req.Partitions[k]
		i := s.visit[k]
		sl := &s.slots[i]
		sl.inReq = -1
		p.hosted = nil
		req.Partitions[k].hosted = nil
		var q bool
		switch {
		case p.Err != nil || p.Records.Size > 0 || k >= first:
		case replica:
			q = quiet[k]
		default:
			end := p.HighWatermark
			if req.IsolationLevel == 1 {
				end = p.LastStableOffset
			}
			q = p.FetchOffset >= end
		}
		if !q {
			s.markPending(i)
		}
		if sl.noteResponse(&p) {
			kept = append(kept, p)
		} else {
			p.Records.Release()
		}
	}
	clear(req.Partitions[len(kept):])
	req.Partitions = kept
	slices.SortFunc(req.Partitions, func(a, b FetchPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}
