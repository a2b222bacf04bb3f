package sim

import (
	"context"
	"slices"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/partition"
)

// fetchRound sends one round of a fetcher of n that has none in flight.
func (s *Sim) fetchRound(n *node) {
	if !n.up() || n.paused {
		return
	}
	fs := n.b.Fetchers()
	if len(fs) == 0 {
		return
	}
	s.fetchRoundOf(n, fs[s.rng.IntN(len(fs))])
}

// fetchRoundOf sends one round of n's fetcher f unless it has one in flight.
func (s *Sim) fetchRoundOf(n *node, f *broker.Fetcher) {
	if n.inflight[f] != 0 {
		return
	}
	r := f.Plan()
	if r.Empty() {
		// The fetcher goroutine parks on an empty round until a partition changes, or for
		// r.Wait: it must not plan nothing while a partition is ready now.
		if r.Wait == 0 && n.b.LogDirOffline() == nil {
			for _, fp := range f.Partitions() {
				if fp.State.Phase != partition.PhaseAwaitingAssignment && (fp.State.DelayedUntil == 0 || fp.State.DelayedUntil <= s.now) {
					s.fail("broker %d fetcher from %d planned an empty round with %s-%d ready (%s): its goroutine would park", n.id, f.Source(), fp.Topic, fp.Partition, fp.State.Phase)
				}
			}
		}
		return
	}
	n.inflight[f] = s.now
	src, inc := f.Source(), n.inc
	s.tracef("broker %d fetcher from %d: round of %d epoch, %d offset, %d fetch questions", n.id, src, len(r.Epochs), len(r.Offsets), len(r.Fetch.Partitions))
	// Copies of the requests (the Round is reused by the next Plan, after this one ends).
	epochs := slices.Clone(r.Epochs)
	offsets := slices.Clone(r.Offsets)
	// The assignments the round was planned under: an answer for a partition that moved
	// away and back meanwhile (num.replica.fetchers changed) is dropped, not applied.
	gens := map[fetchKey]uint64{}
	for _, fp := range f.Partitions() {
		gens[fetchKey{fp.Topic, fp.Partition}] = fp.Gen
	}
	fetch := r.Fetch
	fetch.Partitions = slices.Clone(r.Fetch.Partitions)
	failed := func() {
		if n.inc == inc && n.up() {
			f.Failed(r)
			delete(n.inflight, f)
		}
	}
	s.send(n.id, src, func() {
		srcNode := s.nodes[src]
		if !srcNode.up() {
			s.at(s.now+s.delay(src, n.id), func() { s.deliver(n, inc, failed, nil) }) // connection refused
			return
		}
		s.deliver(srcNode, srcNode.inc, func() {
			var ea []broker.EpochAnswer
			var oa []broker.OffsetAnswer
			var resp []broker.FetchPartition
			fetched := false
			if len(epochs) > 0 {
				ea = broker.ServeEpochs(srcNode.b, epochs)
			}
			if len(offsets) > 0 {
				oa = broker.ServeOffsets(srcNode.b, n.id, offsets)
			}
			if len(fetch.Partitions) > 0 {
				got, err := srcNode.rs.Fetch(context.Background(), srcNode.b, &fetch)
				if err != nil {
					s.fail("broker %d serving a fetch of broker %d: %v", src, n.id, err)
					return
				}
				resp, fetched = copyResponse(got), true
			}
			s.send(src, n.id, func() {
				s.deliver(n, inc, func() {
					if len(ea) > 0 {
						f.ApplyEpochs(r, ea)
					}
					if len(oa) > 0 {
						f.ApplyOffsets(r, oa)
					}
					if fetched {
						// The LEO of each partition before the response: it is applied only
						// at the fetch offset.
						leos := make(map[int32]int64, len(fetch.Partitions))
						for _, q := range fetch.Partitions {
							if rep, ok := n.b.Replica(topic, q.Partition); ok && q.Topic == topic {
								leos[q.Partition] = rep.LEO()
							}
						}
						f.ApplyFetch(r, resp)
						// The HW a follower takes from a response it applied (not one it failed
						// to append, nor its restored checkpoint) never exceeds the leader's.
						if n.b.LogDirOffline() == nil {
							for _, fp := range f.Partitions() {
								qi := slices.IndexFunc(fetch.Partitions, func(q broker.FetchPartition) bool {
									return q.Topic == fp.Topic && q.Partition == fp.Partition && q.CurrentLeaderEpoch == fp.State.LeaderEpoch
								})
								if fp.Topic != topic || fp.State.Phase != partition.PhaseFetching || qi < 0 || fp.Gen != gens[fetchKey{fp.Topic, fp.Partition}] {
									continue
								}
								s.synced[syncKey{n.id, inc, fp.Partition}] = fp.State.LeaderEpoch
								if leo, ok := leos[fp.Partition]; ok && leo == fetch.Partitions[qi].FetchOffset {
									s.checkLogStartFollowed(n, src, fp.Partition, resp)
								}
							}
						}
					}
					delete(n.inflight, f)
					s.tracef("broker %d fetcher from %d: round answered", n.id, src)
				}, nil)
			}, func() { s.deliver(n, inc, failed, nil) })
		}, func() { s.deliver(n, inc, failed, nil) })
	}, func() { s.deliver(n, inc, failed, nil) })
}

// fetchKey names a partition among all a fetcher follows (the data topic and the group
// coordinator's internal topic).
type fetchKey struct {
	topic     string
	partition int32
}

func copyResponse(r []broker.FetchPartition) []broker.FetchPartition {
	out := slices.Clone(r)
	for i := range out {
		out[i].RecordBytes = slices.Clone(out[i].RecordBytes)
	}
	return out
}

// checkLogStartFollowed checks that follower n, having applied a fetch response of source src
// for partition p, took the leader's log start from it, up to its HW (Kafka's
// maybeIncrementLogStartOffset on every response), so that as a leader it never serves
// offsets the old leader deleted.
func (s *Sim) checkLogStartFollowed(n *node, src int32, p int32, resp []broker.FetchPartition) {
	i := slices.IndexFunc(resp, func(fp broker.FetchPartition) bool { return fp.Topic == topic && fp.Partition == p })
	if i < 0 || resp[i].Err != nil || resp[i].LogStartOffsetOut < 0 {
		return
	}
	r, ok := n.b.Replica(topic, p)
	if !ok {
		return
	}
	if want := min(resp[i].LogStartOffsetOut, r.HW()); r.LogStart() < want {
		s.fail("p%d: follower %d applied a response of leader %d with log start %d but its log start is %d (HW %d, LEO %d)",
			p, n.id, src, resp[i].LogStartOffsetOut, r.LogStart(), r.HW(), r.LEO())
	}
}
