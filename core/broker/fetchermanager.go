package broker

import (
	"context"
	"slices"
	"strconv"

	"github.com/isrbench/isrbench/core/partition"
)

// fetcherKey identifies one replica fetcher: (source broker, fetcher index).
type fetcherKey struct {
	source int32
	index  int
}

// Fetchers returns the broker's replica fetchers, ordered by source broker and index.
func (b *Broker) Fetchers() []*Fetcher {
	return sortedValues(&b.mu.RWMutex, b.mu.fetchers, func(x, y *Fetcher) int {
		if x.key.source != y.key.source {
			return int(x.key.source - y.key.source)
		}
		return x.key.index - y.key.index
	})
}

// addToFetcher assigns a follower replica to the fetcher of its leader
// (FetcherFor index), starting the fetcher if needed. Called with b.apply held.
func (b *Broker) addToFetcher(h *hosted, leader int32, leaderEpoch int32) {
	b.assignLocked(h, leader, partition.NewFetchState(leaderEpoch, b.cfg.TruncateMode == partition.TruncateModeHW))
}

// assignLocked puts h on fetcher FetcherFor(topic, partition, num.replica.fetchers) of
// source with fetch state fs and a new generation (answers to earlier requests about it are
// dropped), starting the fetcher if needed (b.apply held).
func (b *Broker) assignLocked(h *hosted, source int32, fs partition.FetchState) {
	key := fetcherKey{source, FetcherFor(h.key.topic, h.key.partition, b.apply.dyn.numFetchers)}
	b.mu.Lock()
	f := b.mu.fetchers[key]
	if f == nil {
		f = &Fetcher{b: b, key: key, wake: make(chan struct{}, 1), done: make(chan struct{})}
		f.mu.parts = make(map[tp]*fetchPart)
		f.mu.ioDone.L = &f.mu
		f.ctx, f.cancel = context.WithCancel(b.ctx)
		b.mu.fetchers[key] = f
		if !b.cfg.Manual {
			b.goLabeledIn(f.ctx, "replica-fetcher", func(ctx context.Context) {
				defer close(f.done)
				f.run(ctx)
			}, "source", strconv.Itoa(int(key.source)), "fetcher", strconv.Itoa(key.index))
		}
	}
	b.mu.Unlock()
	f.mu.Lock()
	f.waitIOLocked()
	if _, ok := f.mu.parts[h.key]; !ok {
		i, _ := slices.BinarySearchFunc(f.mu.order, h.key, tpLess)
		f.mu.order = slices.Insert(f.mu.order, i, h.key)
	}
	f.mu.parts[h.key] = &fetchPart{h: h, gen: nextGen(), fs: fs, leaderHW: -1, planIdx: -1}
	f.mu.planOK = false
	f.mu.Unlock()
	f.signal()
}

// resizeFetchersLocked applies a new num.replica.fetchers n, as Kafka's
// AbstractFetcherManager.resizeThreadPool: every partition whose fetcher index
// FetcherFor(t, p, n) changed moves to that fetcher with its fetch state (phase, epoch,
// backoff) and a new generation, so an answer in flight to the old fetcher is dropped and
// the new one fetches from the replica's LEO: nothing is lost or appended twice. The
// fetchers of indexes >= n stop (their goroutines exit, closing their connections).
// b.apply held.
func (b *Broker) resizeFetchersLocked(n int) {
	if n == b.apply.dyn.numFetchers {
		return
	}
	old := b.apply.dyn.numFetchers
	b.apply.dyn.numFetchers = n
	defer b.numFetchers.Store(int32(n)) // once every partition is on its new fetcher
	type move struct {
		h      *hosted
		source int32
		fs     partition.FetchState
	}
	var moves []move
	for _, f := range b.Fetchers() {
		f.mu.Lock()
		f.waitIOLocked() // the fetch states moved must include what a write in progress does
		kept := f.mu.order[:0]
		for _, k := range f.mu.order {
			fp := f.mu.parts[k]
			if FetcherFor(k.topic, k.partition, n) == f.key.index {
				kept = append(kept, k)
				continue
			}
			moves = append(moves, move{fp.h, f.key.source, fp.fs})
			delete(f.mu.parts, k)
		}
		clear(f.mu.order[len(kept):])
		f.mu.order = kept
		f.mu.planOK = false
		f.mu.Unlock()
		f.signal()
	}
	var stopped []*Fetcher
	b.mu.Lock()
	for k, f := range b.mu.fetchers {
		if k.index >= n {
			delete(b.mu.fetchers, k)
			stopped = append(stopped, f)
		}
	}
	b.mu.Unlock()
	for _, f := range stopped {
		f.cancel()
		if b.cfg.Manual {
			close(f.done)
		}
	}
	for _, m := range moves {
		b.assignLocked(m.h, m.source, m.fs)
	}
	b.logf("broker %d: num.replica.fetchers %d -> %d: %d partition(s) moved, %d fetcher(s) stopped", b.cfg.ID, old, n, len(moves), len(stopped))
}

// NumReplicaFetchers returns the num.replica.fetchers in effect (the static config, or the
// dynamic one last applied).
func (b *Broker) NumReplicaFetchers() int { return int(b.numFetchers.Load()) }

// removeFromFetchers removes a partition from every fetcher. When it
// returns, no fetcher applies data to it any more. Called with b.apply held.
func (b *Broker) removeFromFetchers(key tp) {
	for _, f := range b.Fetchers() {
		f.mu.Lock()
		f.waitIOLocked() // a write to this partition in progress ends first
		_, ok := f.mu.parts[key]
		if ok {
			delete(f.mu.parts, key)
			if i, found := slices.BinarySearchFunc(f.mu.order, key, tpLess); found {
				f.mu.order = slices.Delete(f.mu.order, i, i+1)
			}
			f.mu.planOK = false
		}
		f.mu.Unlock()
		if ok {
			f.signal()
		}
	}
}

// Partitions returns the partitions assigned to this fetcher with their fetch state, in
// order (for tests and the simulator's trace).
func (f *Fetcher) Partitions() []FetcherPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FetcherPartition, 0, len(f.mu.order))
	for _, k := range f.mu.order {
		fp := f.mu.parts[k]
		out = append(out, FetcherPartition{Topic: k.topic, Partition: k.partition, State: fp.fs, Gen: fp.gen})
	}
	return out
}

// FetcherPartition is one partition of a fetcher and its fetch state.
type FetcherPartition struct {
	Topic     string
	Partition int32
	State     partition.FetchState
	// Gen identifies the partition's assignment to the fetcher: the answers of a round
	// planned under another one (the partition moved away and back meanwhile) are dropped.
	Gen uint64
}
