package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/partition"
)

// fetchPart is one partition assigned to a fetcher. Guarded by Fetcher.mu.
type fetchPart struct {
	h   *hosted
	gen uint64 // unique per assignment: answers for an older gen are dropped
	fs  partition.FetchState
	// leaderHW is the leader's HW in the last fetch response applied (-1: none yet): the
	// replica is caught up for the follower throttle when its LEO reached it (Kafka's
	// PartitionFetchState.isReplicaInSync, lag <= 0).
	leaderHW int64
	// planIdx is the partition's index in the last planned round's Fetch.Partitions (-1:
	// not in it); moved is set while it is on Fetcher.mu.moved.
	planIdx int
	moved   bool
}

// Fetcher is one replica fetcher: one connection to its source broker over which it runs
// the replica-fetch protocol (partition.FetchState) for the partitions assigned to it, in
// rounds: the OffsetForLeaderEpoch and ListOffsets questions of the partitions that must
// truncate, else one Fetch of the partitions that fetch. Unless Config.Manual a goroutine
// runs the rounds (labelled role=replica-fetcher); the simulator runs them itself with
// Plan and the Apply methods. Its partition map is guarded by mu, which is released around
// every disk write (a follower append, a truncation): mu.io tells the broker's control path
// (assignLocked, removeFromFetchers, resizeFetchersLocked) to wait for the write, so after
// removeFromFetchers returns the fetcher never touches that partition again.
//
// Plan, Failed and the Apply methods are called by one goroutine at a time (the fetcher's
// own, or the simulator's); the other methods are safe for concurrent use.
type Fetcher struct {
	b    *Broker
	key  fetcherKey
	wake chan struct{} // cap 1: partition set changed / stop

	// ctx ends when the fetcher is removed (a smaller num.replica.fetchers) or the broker
	// stops; done is closed once its goroutine exited.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		parts map[tp]*fetchPart
		order []tp // keys of parts, sorted (deterministic rounds)
		// io is set while the planning or applying goroutine writes to a replica's log
		// with mu released (beginIO .. endIO); ioDone is signalled when it ends. While
		// io is set, parts and order do not change: whoever changes them waits
		// (waitIOLocked).
		io     bool
		ioDone sync.Cond // L: &mu
		// planOK: the last Plan's fetch partitions (round.Fetch.Partitions, fetchGens) are
		// what a new Plan would build, as long as Broker.fetchPlanGen is still planGen. It
		// holds after a round that only fetched, none of whose partitions was delayed or
		// throttled, until anything changes a partition's state (an assignment, an error,
		// a truncation, a failure, retention, a throttle): an idle fetcher plans each round
		// in O(1). A partition whose position or log start moved in an answer applied
		// (records, a new leader log start) goes on moved instead, and the next Plan
		// rereads those entries only: a busy fetcher plans in O(partitions with records).
		planOK  bool
		planGen uint64
		moved   []*fetchPart // planOK: entries of the plan to reread (fetchPart.moved set)
	}

	// Owned by the fetcher goroutine (closeConn after it exited).
	conn        FetchConn
	dialFailing bool
	round       Round
}

// Round is one round's requests, built by Plan and answered through Apply*: Epochs and
// Offsets for partitions that truncate or resolve an out-of-range fetch, else Fetch. The
// slices are reused by the next Plan.
type Round struct {
	Epochs  []EpochQuery
	Offsets []OffsetQuery
	// Fetch is a replica fetch (ReplicaID = this broker); no partitions: nothing to fetch.
	// A reused plan (Fetch.Reused) keeps the previous round's Partitions, updated in place.
	Fetch FetchRequest
	// Wait is, when the round is empty, how long until the earliest delayed partition is
	// ready (0: none is delayed).
	Wait time.Duration

	epochGens  []uint64
	offsetGens []uint64 // one per partition (two queries each: earliest, latest)
	fetchGens  []uint64
}

// Empty reports whether the round has no request.
func (r *Round) Empty() bool {
	return len(r.Epochs) == 0 && len(r.Offsets) == 0 && len(r.Fetch.Partitions) == 0
}

var genCounter atomic.Uint64

func nextGen() uint64 { return genCounter.Add(1) }

// Source is the broker this fetcher fetches from.
func (f *Fetcher) Source() int32 { return f.key.source }

// Index is the fetcher's index among num.replica.fetchers for its source.
func (f *Fetcher) Index() int { return f.key.index }

// Done returns a channel closed once the fetcher has stopped: removed by a smaller
// num.replica.fetchers, or its broker stopped (with Config.Manual: once removed).
func (f *Fetcher) Done() <-chan struct{} { return f.done }

// beginIO releases mu for a write to the log of one of the fetcher's partitions (an
// append, a truncation): no lock is held across disk I/O. mu.io keeps the partition map
// as it is until endIO. Only the goroutine running Plan or an Apply method calls it, with
// mu held.
func (f *Fetcher) beginIO() {
	f.mu.io = true
	f.mu.Unlock()
}

// endIO takes mu back after beginIO and wakes whoever waits to change the partition map.
func (f *Fetcher) endIO() {
	f.mu.Lock()
	f.mu.io = false
	f.mu.ioDone.Broadcast()
}

// waitIOLocked waits (mu held, released meanwhile) until no write of the fetcher is in
// progress; the partition map may then be changed before mu is released.
func (f *Fetcher) waitIOLocked() {
	for f.mu.io {
		f.mu.ioDone.Wait()
	}
}

func (f *Fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *Fetcher) closeConn() {
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// sleep waits d, or until the partition set changes or ctx is done.
func (f *Fetcher) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.wake:
	case <-ctx.Done():
	}
}

func (f *Fetcher) backoffNs() int64 {
	return int64(f.b.cfg.ReplicaFetchBackoffMs) * int64(time.Millisecond)
}

// run is the fetcher loop (labelled role=replica-fetcher).
func (f *Fetcher) run(ctx context.Context) {
	defer f.closeConn()
	b := f.b
	for ctx.Err() == nil {
		if !b.waitResumed(ctx) {
			return
		}
		r := f.Plan()
		if r.Empty() {
			if r.Wait > 0 {
				f.sleep(ctx, r.Wait)
			} else {
				select {
				case <-f.wake:
				case <-ctx.Done():
				}
			}
			continue
		}
		if f.conn == nil {
			conn, err := b.transport.Dial(ctx, f.key.source, f.key.index)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !f.dialFailing { // log the first failure of a streak only
					b.logf("broker %d: replica fetcher %d-%d: dial: %v (retrying every %v)", b.cfg.ID, f.key.source, f.key.index, err, time.Duration(f.backoffNs()))
				}
				f.dialFailing = true
				f.sleep(ctx, time.Duration(f.backoffNs()))
				continue
			}
			f.conn = conn
			f.dialFailing = false
		}
		var err error
		if len(r.Epochs) > 0 {
			var ans []EpochAnswer
			if ans, err = f.conn.OffsetForLeaderEpoch(ctx, r.Epochs); err == nil {
				f.ApplyEpochs(r, ans)
			}
		}
		if err == nil && len(r.Offsets) > 0 {
			var ans []OffsetAnswer
			if ans, err = f.conn.ListOffsets(ctx, b.cfg.ID, r.Offsets); err == nil {
				f.ApplyOffsets(r, ans)
			}
		}
		if err == nil && len(r.Fetch.Partitions) > 0 {
			var resp []FetchPartition
			if resp, err = f.conn.Fetch(ctx, &r.Fetch); err == nil {
				if b.Paused() {
					// Paused while the fetch was in flight: the response is lost
					// (as a stopped process's would time out); drop the connection
					// so a stream transport cannot desynchronise, re-dial on Resume.
					f.closeConn()
					continue
				}
				t0 := time.Now()
				f.ApplyFetch(r, resp)
				b.cfg.Counters.countApply(time.Since(t0))
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.closeConn()
			f.sleep(ctx, time.Duration(f.backoffNs()))
		}
	}
}

// Plan builds the next round from the partitions ready now (clock: Config.Now). A partition
// that truncates without asking the leader (TruncationStep: the "hw" ablation, or no local
// epoch) is truncated here. Nothing is planned while the log directory is offline. The
// returned Round is reused by the next Plan.
func (f *Fetcher) Plan() *Round {
	b := f.b
	cfg := &b.cfg
	r := &f.round
	r.Epochs, r.Offsets, r.Wait = r.Epochs[:0], r.Offsets[:0], 0
	r.epochGens, r.offsetGens = r.epochGens[:0], r.offsetGens[:0]
	r.Fetch = FetchRequest{ReplicaID: cfg.ID, ReplicaEpoch: b.epoch.Load(), MaxWait: time.Duration(cfg.ReplicaFetchWaitMaxMs) * time.Millisecond,
		MinBytes: cfg.ReplicaFetchMinBytes, MaxBytes: cfg.ReplicaFetchResponseMaxBytes, Partitions: r.Fetch.Partitions, Moved: r.Fetch.Moved[:0]}
	if b.usable() != nil {
		r.Fetch.Partitions, r.fetchGens = r.Fetch.Partitions[:0], r.fetchGens[:0]
		f.mu.Lock()
		f.mu.planOK = false // the partitions' indexes in the plan are gone
		f.mu.Unlock()
		return r
	}
	now := b.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	gen := b.fetchPlanGen.Load()
	if f.mu.planOK && f.mu.planGen == gen {
		// The last round's partitions; those that moved are reread in place.
		r.Fetch.Reused = true
		for _, fp := range f.mu.moved {
			fp.moved = false
			p := &r.Fetch.Partitions[fp.planIdx]
			p.FetchOffset, p.LogStartOffset = fp.h.r.LEO(), fp.h.r.LogStart()
			r.Fetch.Moved = append(r.Fetch.Moved, fp.planIdx)
		}
		clear(f.mu.moved)
		f.mu.moved = f.mu.moved[:0]
		slices.Sort(r.Fetch.Moved)
		return r
	}
	for _, fp := range f.mu.moved {
		fp.moved = false
	}
	clear(f.mu.moved)
	f.mu.moved = f.mu.moved[:0]
	r.Fetch.Partitions, r.fetchGens = r.Fetch.Partitions[:0], r.fetchGens[:0]
	// Reusable by the next Plan if this one only fetches, none delayed or throttled.
	cacheable := true
	defer func() {
		if cacheable && len(r.Epochs) == 0 && len(r.Offsets) == 0 && r.Wait == 0 {
			f.mu.planOK, f.mu.planGen = true, gen
		}
	}()
	var fetch []*fetchPart
	for _, key := range f.mu.order {
		fp := f.mu.parts[key]
		fp.planIdx = -1
		if !fp.fs.Ready(now) {
			if d := fp.fs.DelayedUntil - now; fp.fs.Phase != partition.PhaseAwaitingAssignment && d > 0 && (r.Wait == 0 || time.Duration(d) < r.Wait) {
				r.Wait = time.Duration(d)
			}
			continue
		}
		fp.fs.DelayedUntil = 0
		switch fp.fs.Phase {
		case partition.PhaseTruncating:
			cacheable = false
			epoch, ask, act := fp.fs.TruncationStep(fp.h.r)
			if !ask {
				// Truncated locally: it fetches in this very round (an empty round would
				// park the fetcher until the next partition change).
				f.act(fp, act, now)
				if fp.fs.Phase == partition.PhaseFetching && fp.fs.Ready(now) {
					fetch = append(fetch, fp)
				}
				continue
			}
			r.Epochs = append(r.Epochs, EpochQuery{Topic: key.topic, Partition: key.partition, CurrentLeaderEpoch: fp.fs.LeaderEpoch, LeaderEpoch: epoch})
			r.epochGens = append(r.epochGens, fp.gen)
		case partition.PhaseResolvingOffsets:
			for _, ts := range []int64{-2, -1} {
				r.Offsets = append(r.Offsets, OffsetQuery{Topic: key.topic, Partition: key.partition, CurrentLeaderEpoch: fp.fs.LeaderEpoch, Timestamp: ts})
			}
			r.offsetGens = append(r.offsetGens, fp.gen)
		case partition.PhaseFetching:
			fetch = append(fetch, fp)
		}
	}
	if len(r.Epochs) > 0 || len(r.Offsets) > 0 {
		return r // truncate before fetching anything
	}
	throttled := false
	for _, fp := range fetch {
		if fp.h.throttle.Load()&throttleFollower != 0 {
			cacheable = false // followerThrottles changes with the quota's state
		}
		if b.followerThrottles(fp) {
			throttled = true // left out this round (quota.go)
			continue
		}
		rep := fp.h.r
		fp.planIdx = len(r.Fetch.Partitions)
		r.Fetch.Partitions = append(r.Fetch.Partitions, FetchPartition{
			Topic: fp.h.key.topic, Partition: fp.h.key.partition,
			FetchOffset:        rep.LEO(),
			CurrentLeaderEpoch: fp.fs.LeaderEpoch,
			LogStartOffset:     rep.LogStart(),
			MaxBytes:           cfg.ReplicaFetchMaxBytes,
		})
		r.fetchGens = append(r.fetchGens, fp.gen)
	}
	if throttled && len(r.Fetch.Partitions) == 0 {
		// Only throttled partitions: look again after replica.fetch.backoff.ms, as
		// Kafka's fetcher backs off when it has nothing to fetch.
		if d := max(time.Duration(f.backoffNs()), time.Millisecond); r.Wait == 0 || d < r.Wait {
			r.Wait = d
		}
	}
	return r
}

// current returns the partition's state if it is still assigned with gen (mu held).
func (f *Fetcher) current(topic string, p int32, gen uint64) *fetchPart {
	fp := f.mu.parts[tp{topic, p}]
	if fp == nil || fp.gen != gen {
		return nil
	}
	return fp
}

// act carries out a FetchState action on the local replica (mu held; released during the
// truncation).
func (f *Fetcher) act(fp *fetchPart, a partition.FetchAction, now int64) {
	f.mu.planOK = false // called after a FetchState change
	if a.Kind == partition.ActNone {
		return
	}
	leaderEpoch := fp.fs.LeaderEpoch
	var err error
	f.beginIO()
	switch a.Kind {
	case partition.ActTruncate:
		if leo := fp.h.r.LEO(); a.Offset < leo {
			// Kafka logs truncation at INFO: it is where unacknowledged records go.
			f.b.logf("broker %d: %s: truncating from LEO %d to %d (HW %d, leader epoch %d)", f.b.cfg.ID, fp.h.key, leo, a.Offset, fp.h.r.HW(), leaderEpoch)
		}
		err = fp.h.r.TruncateTo(a.Offset)
	case partition.ActTruncateFully:
		err = fp.h.r.TruncateFullyAndStartAt(a.Offset)
	}
	if err != nil {
		f.b.logf("broker %d: %s: truncate to %d: %v", f.b.cfg.ID, fp.h.key, a.Offset, f.b.storageFailed(err))
	}
	f.endIO()
	if err != nil {
		fp.fs.OnAppendError(err, now, f.backoffNs())
	}
}

// Failed applies a connection error to the round's partitions: they back off
// replica.fetch.backoff.ms (the goroutine also closes and re-dials the connection).
func (f *Fetcher) Failed(r *Round) {
	now := f.b.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.planOK = false
	inRound := map[uint64]bool{}
	for _, gens := range [][]uint64{r.epochGens, r.offsetGens, r.fetchGens} {
		for _, g := range gens {
			inRound[g] = true
		}
	}
	for _, fp := range f.mu.parts {
		if inRound[fp.gen] {
			fp.fs.DelayedUntil = now + f.backoffNs()
		}
	}
}

// ApplyEpochs applies the OffsetForLeaderEpoch answers to r.Epochs (KIP-101/KIP-279).
func (f *Fetcher) ApplyEpochs(r *Round, answers []EpochAnswer) {
	now := f.b.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var byKey map[tp]int // built when the answers do not come in the queries' order
	for i := range answers {
		a := &answers[i]
		qi := -1
		if i < len(r.Epochs) && r.Epochs[i].Topic == a.Topic && r.Epochs[i].Partition == a.Partition {
			qi = i
		} else {
			if byKey == nil {
				byKey = make(map[tp]int, len(r.Epochs))
				for j, q := range r.Epochs {
					if _, dup := byKey[tp{q.Topic, q.Partition}]; !dup {
						byKey[tp{q.Topic, q.Partition}] = j
					}
				}
			}
			if j, ok := byKey[tp{a.Topic, a.Partition}]; ok {
				qi = j
			}
		}
		if qi < 0 {
			continue // not asked for (peer bug)
		}
		fp := f.current(a.Topic, a.Partition, r.epochGens[qi])
		if fp == nil || fp.fs.Phase != partition.PhaseTruncating {
			continue
		}
		if a.Err == nil && a.LeaderEpoch > r.Epochs[qi].LeaderEpoch {
			f.b.logf("broker %d: %s: OffsetForLeaderEpoch(%d) answered epoch %d", f.b.cfg.ID, fp.h.key, r.Epochs[qi].LeaderEpoch, a.LeaderEpoch)
		}
		f.act(fp, fp.fs.OnEpochAnswer(fp.h.r, r.Epochs[qi].LeaderEpoch, a.LeaderEpoch, a.EndOffset, a.Err, now, f.backoffNs()), now)
	}
}

// ApplyOffsets applies the ListOffsets answers (earliest and latest) to r.Offsets (Kafka's
// fetchOffsetAndTruncate after OFFSET_OUT_OF_RANGE).
func (f *Fetcher) ApplyOffsets(r *Round, answers []OffsetAnswer) {
	now := f.b.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var byKey map[tp][]int // answers by partition, in order
	for i, gen := range r.offsetGens {
		q := r.Offsets[2*i]
		fp := f.current(q.Topic, q.Partition, gen)
		if fp == nil || fp.fs.Phase != partition.PhaseResolvingOffsets {
			continue
		}
		start, end := int64(-1), int64(-1)
		var err error
		if byKey == nil {
			byKey = make(map[tp][]int, len(answers))
			for j := range answers {
				k := tp{answers[j].Topic, answers[j].Partition}
				byKey[k] = append(byKey[k], j)
			}
		}
		for _, j := range byKey[tp{q.Topic, q.Partition}] {
			a := &answers[j]
			if a.Err != nil {
				err = a.Err
			}
			switch a.Timestamp {
			case -2:
				start = a.Offset
			case -1:
				end = a.Offset
			}
		}
		f.act(fp, fp.fs.OnLeaderOffsets(fp.h.r, start, end, err, now, f.backoffNs()), now)
	}
}

// ApplyFetch applies a replica fetch response (FetchConn.Fetch's partitions) to r.Fetch:
// each partition's RecordBytes are appended (then the leader's HW applied, then its log start
// followed up to the HW: partition.Replica.FollowLeaderLogStart), or its error handled by its
// FetchState. mu is released during each append (beginIO).
func (f *Fetcher) ApplyFetch(r *Round, resp []FetchPartition) {
	b := f.b
	now := b.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	asked := r.Fetch.Partitions
	next := 0 // a leader answers in request order: try the partition after the last one first
	for i := range resp {
		res := &resp[i]
		idx := -1
		if fp := f.mu.parts[tp{res.Topic, res.Partition}]; fp != nil && fp.planIdx >= 0 && fp.planIdx < len(asked) &&
			asked[fp.planIdx].Topic == res.Topic && asked[fp.planIdx].Partition == res.Partition {
			idx = fp.planIdx // where the plan put it: O(1)
		} else if next < len(asked) && asked[next].Topic == res.Topic && asked[next].Partition == res.Partition {
			idx = next
		} else {
			// Moved away meanwhile (its fetchPart is new): look ahead first, then from the
			// start, so that one response costs O(asked).
			match := func(p FetchPartition) bool { return p.Topic == res.Topic && p.Partition == res.Partition }
			if j := slices.IndexFunc(asked[min(next, len(asked)):], match); j >= 0 {
				idx = next + j
			} else {
				idx = slices.IndexFunc(asked, match)
			}
		}
		if idx < 0 {
			continue // not asked for (peer bug) — ignore
		}
		next = idx + 1
		fp := f.current(res.Topic, res.Partition, r.fetchGens[idx])
		if fp == nil || fp.fs.Phase != partition.PhaseFetching {
			continue // reassigned or re-truncating meanwhile
		}
		rep := fp.h.r
		fetchOffset := r.Fetch.Partitions[idx].FetchOffset
		if res.Err != nil || rep.LEO() != fetchOffset {
			f.mu.planOK = false // the partition's state changes, or its position moved elsewhere
		}
		if res.Err != nil {
			fp.fs.OnFetchError(res.Err, now, f.backoffNs())
			continue
		}
		if rep.LEO() != fetchOffset {
			continue // truncated meanwhile; refetch
		}
		if len(res.RecordBytes) > 0 || res.LogStartOffsetOut > rep.LogStart() {
			f.movedLocked(fp, idx) // its position or log start moves
		}
		if fp.h.throttle.Load()&throttleFollower != 0 {
			b.quotas.follower.Record(int64(len(res.RecordBytes))) // received, before the append shows them
		}
		f.beginIO()
		_, err := rep.AppendAsFollower(res.RecordBytes, res.HighWatermark)
		if err != nil && !b.fetchedCorrupt(fp.h.key, f.key.source, fetchOffset, err) {
			b.logf("broker %d: %s: follower append at %d: %v", b.cfg.ID, fp.h.key, fetchOffset, b.storageFailed(err))
		} else if res.LogStartOffsetOut > rep.LogStart() {
			// The leader's log start moved (retention): follow it, bounded by the HW.
			var deleted int
			if deleted, err = rep.FollowLeaderLogStart(res.LogStartOffsetOut); err != nil {
				b.logf("broker %d: %s: following the leader's log start %d: %v", b.cfg.ID, fp.h.key, res.LogStartOffsetOut, b.storageFailed(err))
			} else if deleted > 0 {
				b.logf("broker %d: %s: log start %d after the leader's %d: %d segments deleted", b.cfg.ID, fp.h.key, rep.LogStart(), res.LogStartOffsetOut, deleted)
			}
		}
		f.endIO()
		if err != nil {
			f.mu.planOK = false // it backs off
			fp.fs.OnAppendError(err, now, f.backoffNs())
			continue
		}
		fp.leaderHW = res.HighWatermark
	}
}

// movedLocked notes that fp, at index idx of the planned round, moves its position or log
// start (mu held): a reusable plan rereads its entry; otherwise the next plan is built
// afresh anyway.
func (f *Fetcher) movedLocked(fp *fetchPart, idx int) {
	if !f.mu.planOK || fp.moved {
		return
	}
	if fp.planIdx != idx {
		f.mu.planOK = false // not where the plan put it: plan afresh
		return
	}
	fp.moved = true
	f.mu.moved = append(f.mu.moved, fp)
}
