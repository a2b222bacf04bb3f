package broker

import (
	"testing"

	"github.com/isrbench/isrbench/core/records"
)

// TestFetcherMaxLag: the follower-side MaxLag (ReplicaFetcherManager) is, as Kafka's
// AbstractFetcherThread computes it, max(0, the leader's HW in the last fetch response - the
// replica's LEO after applying it), per partition (FetcherLags) and as the max; the leader's
// own view (Metrics.MaxLag) is separate.
func TestFetcherMaxLag(t *testing.T) {
	ctrl, bs := manualBrokers(t, 3)
	states, err := ctrl.CreateTopic("t", 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := states[0]
	f := bs[st.Replicas[0]]
	if f.ID() == st.Leader {
		f = bs[st.Replicas[1]]
	}
	syncAll(t, ctrl, bs)
	if m := f.Metrics(); m.FetcherMaxLag != 0 || len(f.FetcherLags()) != 0 {
		t.Fatalf("before any response: FetcherMaxLag %d, lags %v; want 0 and none", m.FetcherMaxLag, f.FetcherLags())
	}
	var fe *Fetcher
	for _, x := range f.Fetchers() {
		if x.Source() == st.Leader && len(x.Partitions()) > 0 {
			fe = x
		}
	}
	if fe == nil {
		t.Fatal("no fetcher from the leader")
	}
	respond := func(fetchOffset int64, blob []byte, leaderHW int64) {
		t.Helper()
		round := fe.Plan()
		if len(round.Fetch.Partitions) != 1 || round.Fetch.Partitions[0].FetchOffset != fetchOffset {
			t.Fatalf("round %+v: want a fetch at %d", round.Fetch.Partitions, fetchOffset)
		}
		fe.ApplyFetch(round, []FetchPartition{{Topic: "t", Partition: 0, HighWatermark: leaderHW, LastStableOffset: leaderHW, LogStartOffsetOut: 0, RecordBytes: blob}})
	}
	// [0, 3) applied while the leader's HW is 10 (a response cut by the fetch size): lag 7.
	respond(0, records.AppendBatch(nil, 0, 0, 1, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}), 10)
	lags := f.FetcherLags()
	if len(lags) != 1 || lags[0] != (FetcherLag{Topic: "t", Partition: 0, Source: st.Leader, Fetcher: 0, Lag: 7}) {
		t.Fatalf("lags %+v, want t-0 from %d lag 7", lags, st.Leader)
	}
	if m := f.Metrics(); m.FetcherMaxLag != 7 || m.MaxLag != 0 {
		t.Fatalf("follower metrics: FetcherMaxLag %d (want 7), leader-side MaxLag %d (want 0: it leads nothing)", m.FetcherMaxLag, m.MaxLag)
	}
	// Caught up: [3, 10) with the leader's HW 10: lag 0; a leader HW below the LEO is 0, not negative.
	var blob []byte
	for o := int64(3); o < 10; o++ {
		blob = records.AppendBatch(blob, o, 0, 1, []records.Record{{Value: []byte("x")}})
	}
	respond(3, blob, 10)
	if m := f.Metrics(); m.FetcherMaxLag != 0 {
		t.Fatalf("caught up: FetcherMaxLag %d, want 0", m.FetcherMaxLag)
	}
	respond(10, nil, 4)
	if lags := f.FetcherLags(); len(lags) != 1 || lags[0].Lag != 0 {
		t.Fatalf("leader HW below the LEO: lags %+v, want 0", lags)
	}
}
