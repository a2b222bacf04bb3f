package broker

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
)

// warmFetcher runs f's rounds with empty answers until its plan is reused (the first
// rounds truncate the new replicas), and returns that round.
func warmFetcher(t testing.TB, f *Fetcher) *Round {
	t.Helper()
	r := f.Plan()
	for i := 0; i < 10; i++ {
		f.ApplyFetch(r, nil)
		if r = f.Plan(); r.Fetch.Reused {
			return r
		}
	}
	t.Fatalf("the fetcher did not reuse its plan after 10 idle rounds: %+v", r.Fetch)
	return nil
}

// answerRecords is an answer to r with n records for each of the plan's entries at idxs,
// at the replica's LEO.
func answerRecords(t testing.TB, b *Broker, r *Round, n int, idxs ...int) []FetchPartition {
	t.Helper()
	var out []FetchPartition
	for _, i := range idxs {
		q := r.Fetch.Partitions[i]
		rep, ok := b.Replica(q.Topic, q.Partition)
		if !ok {
			t.Fatalf("no replica %s-%d", q.Topic, q.Partition)
		}
		recs := make([]records.Record, n)
		for j := range recs {
			recs[j].Value = []byte(fmt.Sprintf("%d-%d", q.Partition, rep.LEO()+int64(j)))
		}
		out = append(out, FetchPartition{Topic: q.Topic, Partition: q.Partition, HighWatermark: rep.LEO() + int64(n),
			RecordBytes: records.AppendBatch(nil, rep.LEO(), q.CurrentLeaderEpoch, 1, recs)})
	}
	return out
}

// TestFetcherPlanMovesOnlyAnsweredPartitions: with many partitions, a round whose answer
// carries records for some of them reuses the plan and rereads only those entries
// (FetchRequest.Moved, ascending, whatever the answer's order); the reused plan is the one a
// fresh plan builds. An error answer for one partition makes the next plan fresh.
func TestFetcherPlanMovesOnlyAnsweredPartitions(t *testing.T) {
	follower, f := manualFollowerN(t, nil, 12)
	r := warmFetcher(t, f)
	n := len(r.Fetch.Partitions)
	if n < 4 {
		t.Fatalf("the fetcher follows %d partitions, want >= 4", n)
	}
	a, b := n-1, 1 // answered out of order
	f.ApplyFetch(r, answerRecords(t, follower, r, 3, a, b))
	r = f.Plan()
	if !r.Fetch.Reused || !slices.Equal(r.Fetch.Moved, []int{b, a}) {
		t.Fatalf("round after records on entries %d and %d: reused %v moved %v, want reused with [%d %d]", a, b, r.Fetch.Reused, r.Fetch.Moved, b, a)
	}
	for i, p := range r.Fetch.Partitions {
		want := int64(0)
		if i == a || i == b {
			want = 3
		}
		if p.FetchOffset != want {
			t.Errorf("entry %d (%s-%d) at %d, want %d", i, p.Topic, p.Partition, p.FetchOffset, want)
		}
	}
	reused := slices.Clone(r.Fetch.Partitions)
	follower.fetchPlanGen.Add(1) // as retention would: the next plan is built afresh
	f.ApplyFetch(r, nil)
	if r = f.Plan(); r.Fetch.Reused || !reflect.DeepEqual(r.Fetch.Partitions, reused) {
		t.Fatalf("fresh plan (reused %v):\n%+v\nwant the reused one\n%+v", r.Fetch.Reused, r.Fetch.Partitions, reused)
	}
	f.ApplyFetch(r, nil)
	if r = f.Plan(); !r.Fetch.Reused || len(r.Fetch.Moved) != 0 {
		t.Fatalf("idle round: reused %v moved %v, want the plan reused as it was", r.Fetch.Reused, r.Fetch.Moved)
	}
	// Records on one partition and an error on another: the next plan is fresh, and it
	// leaves out the partition backing off.
	ans := answerRecords(t, follower, r, 1, 0)
	ans = append(ans, FetchPartition{Topic: r.Fetch.Partitions[2].Topic, Partition: r.Fetch.Partitions[2].Partition, Err: kerr.UnknownServerError})
	f.ApplyFetch(r, ans)
	if r = f.Plan(); r.Fetch.Reused || len(r.Fetch.Partitions) != n-1 || r.Fetch.Partitions[0].FetchOffset != 1 {
		t.Fatalf("round after an error answer: reused %v, %d partitions, first at %d; want a fresh plan of %d, the first at 1",
			r.Fetch.Reused, len(r.Fetch.Partitions), r.Fetch.Partitions[0].FetchOffset, n-1)
	}
}

// BenchmarkFetcherRound: a follower's fetcher over the partitions of an RF 2 topic (half
// of them led by the other broker) applies one answer with one record for one partition
// after another, then plans its next round. ns/op is one follower append plus one plan: it
// should not grow with the partitions the fetcher follows (the plan rereads only the
// partition that moved).
func BenchmarkFetcherRound(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			follower, f := manualFollowerN(b, nil, 2*n) // the fetcher follows n of them
			r := warmFetcher(b, f)
			// Every replica's first append records its leader epoch (a checkpoint write):
			// done before the timer.
			all := make([]int, len(r.Fetch.Partitions))
			for i := range all {
				all[i] = i
			}
			f.ApplyFetch(r, answerRecords(b, follower, r, 1, all...))
			r = f.Plan()
			recs := []records.Record{{Value: make([]byte, 100)}}
			ans := make([]FetchPartition, 1)
			var buf []byte
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q := &r.Fetch.Partitions[i%len(r.Fetch.Partitions)]
				buf = records.AppendBatch(buf[:0], q.FetchOffset, q.CurrentLeaderEpoch, 1, recs)
				ans[0] = FetchPartition{Topic: q.Topic, Partition: q.Partition, HighWatermark: q.FetchOffset + 1, RecordBytes: buf}
				f.ApplyFetch(r, ans)
				r = f.Plan()
			}
		})
	}
}
