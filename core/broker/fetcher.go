package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fetcherKey identifies one replica fetcher: (source broker, fetcher index).
type fetcherKey struct {
	source int32
	index  int
}

// fetchPart is one partition assigned to a fetcher. Guarded by fetcher.mu.
type fetchPart struct {
	h           *hosted
	leaderEpoch int32  // the leader epoch this follower was assigned with
	gen         uint64 // unique per assignment: responses for an older gen are dropped
	// truncating: the partition must truncate (OffsetForLeaderEpoch) before
	// fetching (set on assignment and after divergence/append errors).
	truncating bool
	// oor: the leader answered OFFSET_OUT_OF_RANGE above its log start: truncate
	// to the leader's LEO (asked as the end offset of its current epoch).
	oor bool
	// waitMetadata: fenced; skip until reassigned with a newer epoch.
	waitMetadata bool
	delayedUntil time.Time // zero = not delayed
}

// fetcher is one replica fetcher goroutine with one FetchConn to its source
// broker. Its partition map is guarded by mu, which is also held while a
// response is applied: after removeFromFetchers returns, the old fetcher
// never touches that partition again.
type fetcher struct {
	b    *Broker
	key  fetcherKey
	wake chan struct{} // cap 1: partition set changed / stop

	mu    sync.Mutex
	parts map[tp]*fetchPart

	// Owned by the fetcher goroutine (closeConn after it exited).
	conn        FetchConn
	dialFailing bool
	req         ReplicaFetch
	gens        []uint64
	reqIdx      map[tp]int
	queries     []EpochQuery
	qgens       []uint64
}

var genCounter struct {
	sync.Mutex
	n uint64
}

func nextGen() uint64 {
	genCounter.Lock()
	defer genCounter.Unlock()
	genCounter.n++
	return genCounter.n
}

// addToFetcher assigns a follower replica to the fetcher of its leader
// (FetcherFor index), starting the fetcher if needed. Called under applyMu.
func (b *Broker) addToFetcher(h *hosted, leader int32, leaderEpoch int32) {
	key := fetcherKey{leader, FetcherFor(h.key.topic, h.key.partition, b.cfg.NumReplicaFetchers)}
	b.mu.Lock()
	f := b.fetchers[key]
	if f == nil {
		f = &fetcher{b: b, key: key, wake: make(chan struct{}, 1), parts: make(map[tp]*fetchPart), reqIdx: make(map[tp]int)}
		b.fetchers[key] = f
		b.goLabeled("replica-fetcher", f.run, "source", strconv.Itoa(int(key.source)), "fetcher", strconv.Itoa(key.index))
	}
	b.mu.Unlock()
	f.mu.Lock()
	f.parts[h.key] = &fetchPart{h: h, leaderEpoch: leaderEpoch, gen: nextGen(), truncating: true}
	f.mu.Unlock()
	f.signal()
}

// removeFromFetchers removes a partition from every fetcher. When it
// returns, no fetcher applies data to it any more. Called under applyMu.
func (b *Broker) removeFromFetchers(key tp) {
	b.mu.RLock()
	fs := make([]*fetcher, 0, len(b.fetchers))
	for _, f := range b.fetchers {
		fs = append(fs, f)
	}
	b.mu.RUnlock()
	for _, f := range fs {
		f.mu.Lock()
		_, ok := f.parts[key]
		delete(f.parts, key)
		f.mu.Unlock()
		if ok {
			f.signal()
		}
	}
}

func (f *fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) closeConn() {
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// sleep waits d, or until the partition set changes or ctx is done.
func (f *fetcher) sleep(ctx context.Context, d time.Duration) {
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

func (f *fetcher) backoff() time.Duration {
	return time.Duration(f.b.cfg.ReplicaFetchBackoffMs) * time.Millisecond
}

// run is the fetcher loop (labelled role=replica-fetcher).
func (f *fetcher) run(ctx context.Context) {
	defer f.closeConn()
	b := f.b
	for ctx.Err() == nil {
		if !b.waitResumed(ctx) {
			return
		}
		nTrunc, nFetch, wait := f.plan()
		if nTrunc == 0 && nFetch == 0 {
			if wait > 0 {
				f.sleep(ctx, wait)
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
					b.logf("broker %d: replica fetcher %d-%d: dial: %v (retrying every %v)", b.cfg.ID, f.key.source, f.key.index, err, f.backoff())
				}
				f.dialFailing = true
				f.sleep(ctx, f.backoff())
				continue
			}
			f.conn = conn
			f.dialFailing = false
		}
		if nTrunc > 0 {
			if err := f.truncate(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				f.closeConn()
				f.sleep(ctx, f.backoff())
			}
			continue
		}
		resp, err := f.conn.Fetch(ctx, &f.req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.closeConn()
			f.sleep(ctx, f.backoff())
			continue
		}
		if b.Paused() {
			// Paused while the fetch was in flight: the response is lost
			// (as a stopped process's would time out); drop the connection
			// so a stream transport cannot desynchronise, re-dial on Resume.
			f.closeConn()
			continue
		}
		f.process(resp)
	}
}

// plan builds f.req from the partitions ready to fetch and counts those
// that must truncate first; wait is the time until the earliest delayed
// partition is ready (0 = none delayed).
func (f *fetcher) plan() (nTrunc, nFetch int, wait time.Duration) {
	cfg := &f.b.cfg
	f.req.ReplicaID = cfg.ID
	f.req.MaxWaitMs = cfg.ReplicaFetchWaitMaxMs
	f.req.MinBytes = cfg.ReplicaFetchMinBytes
	f.req.MaxBytes = cfg.ReplicaFetchResponseMaxBytes
	f.req.Partitions = f.req.Partitions[:0]
	f.gens = f.gens[:0]
	clear(f.reqIdx)
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, fp := range f.parts {
		if fp.waitMetadata {
			continue
		}
		if !fp.delayedUntil.IsZero() {
			if d := fp.delayedUntil.Sub(now); d > 0 {
				if wait == 0 || d < wait {
					wait = d
				}
				continue
			}
			fp.delayedUntil = time.Time{}
		}
		if fp.truncating || fp.oor {
			nTrunc++
			continue
		}
		r := fp.h.r
		f.reqIdx[key] = len(f.req.Partitions)
		f.req.Partitions = append(f.req.Partitions, ReplicaFetchPartition{
			Topic: key.topic, Partition: key.partition,
			FetchOffset:        r.LEO(),
			CurrentLeaderEpoch: fp.leaderEpoch,
			LogStartOffset:     r.LogStart(),
			MaxBytes:           cfg.ReplicaFetchMaxBytes,
		})
		f.gens = append(f.gens, fp.gen)
	}
	return nTrunc, len(f.req.Partitions), wait
}

// current returns the partition's state if it is still assigned with gen.
func (f *fetcher) current(topic string, p int32, gen uint64) *fetchPart {
	fp := f.parts[tp{topic, p}]
	if fp == nil || fp.gen != gen {
		return nil
	}
	return fp
}

func (f *fetcher) delay(fp *fetchPart) {
	fp.delayedUntil = time.Now().Add(f.backoff())
}

// process applies one fetch response under f.mu.
func (f *fetcher) process(resp *ReplicaFetchResponse) {
	b := f.b
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range resp.Partitions {
		res := &resp.Partitions[i]
		idx, ok := f.reqIdx[tp{res.Topic, res.Partition}]
		if !ok {
			continue // not asked for (peer bug) — ignore
		}
		fp := f.current(res.Topic, res.Partition, f.gens[idx])
		if fp == nil {
			continue // reassigned while the fetch was in flight
		}
		r := fp.h.r
		fetchOffset := f.req.Partitions[idx].FetchOffset
		if res.Err != nil {
			f.handleFetchError(fp, res, fetchOffset)
			continue
		}
		if r.LEO() != fetchOffset {
			continue // truncated meanwhile; refetch
		}
		if err := appendAsFollower(r, res.Records, res.HighWatermark); err != nil {
			switch {
			case errors.Is(err, kerr.KafkaStorageError):
				b.logf("broker %d: %s: follower append failed, partition stops fetching: %v", b.cfg.ID, fp.h.key, err)
				fp.waitMetadata = true
			default:
				b.logf("broker %d: %s: follower append at %d: %v; re-truncating", b.cfg.ID, fp.h.key, fetchOffset, err)
				fp.truncating = true
				f.delay(fp)
			}
		}
	}
}

func (f *fetcher) handleFetchError(fp *fetchPart, res *ReplicaFetchResult, fetchOffset int64) {
	b := f.b
	switch {
	case errors.Is(res.Err, kerr.OffsetOutOfRange):
		if res.LogStartOffset >= 0 && fetchOffset < res.LogStartOffset {
			// Below the leader's log start: start over at it (Kafka's
			// truncateFullyAndStartAt).
			if err := truncateFullyAndStartAt(fp.h.r, res.LogStartOffset); err != nil {
				b.logf("broker %d: %s: truncate fully at %d: %v", b.cfg.ID, fp.h.key, res.LogStartOffset, err)
				f.delay(fp)
			}
			return
		}
		fp.oor = true // above the leader's LEO: truncate to it
	case errors.Is(res.Err, kerr.FencedLeaderEpoch):
		fp.waitMetadata = true // our epoch is old: wait for the new assignment
	default:
		// UNKNOWN_LEADER_EPOCH (the leader has not applied the new epoch
		// yet), NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...
		f.delay(fp)
	}
}

// truncate runs one OffsetForLeaderEpoch round for every partition that
// must truncate; a returned error is a connection error.
func (f *fetcher) truncate(ctx context.Context) error {
	b := f.b
	f.queries = f.queries[:0]
	f.qgens = f.qgens[:0]
	f.mu.Lock()
	for key, fp := range f.parts {
		if fp.waitMetadata || !fp.delayedUntil.IsZero() || (!fp.truncating && !fp.oor) {
			continue
		}
		r := fp.h.r
		if fp.oor {
			f.queries = append(f.queries, EpochQuery{Topic: key.topic, Partition: key.partition, CurrentLeaderEpoch: fp.leaderEpoch, LeaderEpoch: fp.leaderEpoch})
			f.qgens = append(f.qgens, fp.gen)
			continue
		}
		latest := r.LatestEpoch()
		if b.cfg.TruncateMode == "hw" || latest < 0 {
			// Ablation (or no epoch known locally, as Kafka's fallback):
			// truncate to the local HW.
			if err := truncateTo(r, min(r.HW(), r.LEO())); err != nil {
				b.logf("broker %d: %s: truncate to HW: %v", b.cfg.ID, key, err)
				f.delay(fp)
				continue
			}
			fp.truncating = false
			continue
		}
		f.queries = append(f.queries, EpochQuery{Topic: key.topic, Partition: key.partition, CurrentLeaderEpoch: fp.leaderEpoch, LeaderEpoch: latest})
		f.qgens = append(f.qgens, fp.gen)
	}
	f.mu.Unlock()
	if len(f.queries) == 0 {
		return nil
	}
	answers, err := f.conn.OffsetForLeaderEpoch(ctx, f.queries)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range answers {
		a := &answers[i]
		qi := -1
		for j := range f.queries {
			if f.queries[j].Topic == a.Topic && f.queries[j].Partition == a.Partition {
				qi = j
				break
			}
		}
		if qi < 0 {
			continue
		}
		fp := f.current(a.Topic, a.Partition, f.qgens[qi])
		if fp == nil {
			continue
		}
		if a.Err != nil {
			if errors.Is(a.Err, kerr.FencedLeaderEpoch) {
				fp.waitMetadata = true
			} else {
				f.delay(fp)
			}
			continue
		}
		r := fp.h.r
		leo := r.LEO()
		if fp.oor {
			if a.EndOffset < 0 {
				f.delay(fp)
				continue
			}
			if a.EndOffset < leo {
				if err := truncateTo(r, a.EndOffset); err != nil {
					b.logf("broker %d: %s: truncate to leader LEO %d: %v", b.cfg.ID, fp.h.key, a.EndOffset, err)
					f.delay(fp)
					continue
				}
			}
			fp.oor = false
			continue
		}
		if a.LeaderEpoch > f.queries[qi].LeaderEpoch {
			// A leader must answer with an epoch <= the one asked for.
			b.logf("broker %d: %s: OffsetForLeaderEpoch(%d) answered epoch %d", b.cfg.ID, fp.h.key, f.queries[qi].LeaderEpoch, a.LeaderEpoch)
			f.delay(fp)
			continue
		}
		t := r.TruncationFor(a.LeaderEpoch, a.EndOffset)
		if t.Offset < leo {
			if err := truncateTo(r, t.Offset); err != nil {
				b.logf("broker %d: %s: truncate to %d: %v", b.cfg.ID, fp.h.key, t.Offset, err)
				f.delay(fp)
				continue
			}
		}
		if t.Done {
			fp.truncating = false
		}
	}
	return nil
}
