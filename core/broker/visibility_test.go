package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
)

// These tests pin what consumers see, through the code production runs (Broker.Fetch,
// Broker.ListOffsetFor and the replica fetcher): a consumer reads [log start, HW), never a
// batch holding an offset at or past the HW; ListOffsets LATEST answers it the HW; a
// follower's HW never passes its own LEO nor the leader's HW; and so a consumer never reads
// a record that a later election truncates away.

// fetchedBatch is one batch a consumer fetch returned.
type fetchedBatch struct {
	base, last int64
	values     []string
}

// consumerFetch runs one consumer Fetch (replica id -1, read_uncommitted) of topic-p at
// from on b and returns the batches it served and the HW it reported.
func consumerFetch(t *testing.T, b *Broker, topic string, p int32, from int64) ([]fetchedBatch, int64, error) {
	t.Helper()
	req := &FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
		Topic: topic, Partition: p, FetchOffset: from, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
	b.Fetch(context.Background(), req)
	fp := &req.Partitions[0]
	defer fp.Records.Release()
	if fp.Err != nil {
		return nil, -1, fp.Err
	}
	data, err := fp.Records.ReadAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []fetchedBatch
	err = records.Split(data, func(bb []byte, h records.Header) error {
		fb := fetchedBatch{base: h.BaseOffset, last: h.LastOffset()}
		err := records.ForEachRecord(bb, func(_, _ int64, _, v []byte) error {
			fb.values = append(fb.values, string(v))
			return nil
		})
		out = append(out, fb)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, fp.HighWatermark, nil
}

// batchAt builds one batch of n records "prefix-i" with base timestamp ts (ms).
func batchAt(prefix string, n int, ts int64) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return records.AppendBatch(nil, 0, 0, ts, recs)
}

// leaderAheadOfHW builds a 3-broker cluster with t-0 (RF 3, min.insync.replicas 2), commits
// "a-0..a-2" (offsets 0..2, timestamp 1000) with acks=all, pauses both followers (caught up:
// they stay in the ISR) and appends "b-0..b-3" (offsets 3..6, timestamp 2000) with acks=1:
// the leader's LEO is 7 and its HW 3. It returns the cluster, the leader and the followers.
func leaderAheadOfHW(t *testing.T) (*testCluster, *Broker, []*Broker) {
	t.Helper()
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	if res := produce(t, l, -1, "t", 0, batchAt("a", 3, 1000)); res.Err != nil {
		t.Fatal(res.Err)
	}
	var followers []*Broker
	for _, id := range c.ids() {
		if id != l.ID() {
			followers = append(followers, c.broker(id))
		}
	}
	for _, f := range followers {
		f.Pause()
	}
	if res := produce(t, l, 1, "t", 0, batchAt("b", 4, 2000)); res.Err != nil || res.BaseOffset != 3 {
		t.Fatalf("acks=1 append: %+v", res)
	}
	r, _ := l.Replica("t", 0)
	if r.LEO() != 7 || r.HW() != 3 {
		t.Fatalf("leader LEO %d HW %d, want 7 and 3", r.LEO(), r.HW())
	}
	return c, l, followers
}

// checkConsumerView fetches as a consumer from every offset in [0, LEO] and checks that no
// batch holding an offset >= the HW comes back, that every record below the HW's batch
// boundary does, and that a fetch at or past the HW answers nothing (and no error).
func checkConsumerView(t *testing.T, l *Broker, want []string) {
	t.Helper()
	r, _ := l.Replica("t", 0)
	hw, leo := r.HW(), r.LEO()
	for from := int64(0); from <= leo; from++ {
		bs, gotHW, err := consumerFetch(t, l, "t", 0, from)
		if err != nil {
			t.Fatalf("consumer fetch at %d (HW %d, LEO %d): %v", from, hw, leo, err)
		}
		if gotHW != hw {
			t.Errorf("consumer fetch at %d: high watermark %d, want %d", from, gotHW, hw)
		}
		var vals []string
		for _, b := range bs {
			if b.last >= hw {
				t.Fatalf("consumer fetch at %d returned batch [%d, %d] holding offsets at or past the HW %d (LEO %d): %v",
					from, b.base, b.last, hw, leo, b.values)
			}
			for i, v := range b.values {
				if b.base+int64(i) >= from {
					vals = append(vals, v)
				}
			}
		}
		var wantFrom []string
		if from < int64(len(want)) {
			wantFrom = want[from:]
		}
		if from < hw && !slices.Equal(vals, wantFrom) {
			t.Errorf("consumer fetch at %d (HW %d): read %v, want %v", from, hw, vals, wantFrom)
		}
	}
}

// TestConsumerFetchStopsBelowHW: a consumer fetch never returns a batch with an offset at or
// past the HW, even while the leader's LEO is past it, and returns every record below it;
// with an HW inside a batch (a follower's fetch offset there), that batch is not returned
// either. Through the long poll too: a consumer parked at the HW is not woken by an append
// the HW has not passed.
func TestConsumerFetchStopsBelowHW(t *testing.T) {
	_, l, followers := leaderAheadOfHW(t)
	checkConsumerView(t, l, []string{"a-0", "a-1", "a-2"})

	// A parked consumer at the HW is not served the acks=1 records appended meanwhile.
	req := &FetchRequest{ReplicaID: -1, MaxWait: 100 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []FetchPartition{{Topic: "t", FetchOffset: 3, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Fetch(context.Background(), req)
	}()
	if res := produce(t, l, 1, "t", 0, batchAt("c", 2, 3000)); res.Err != nil {
		t.Fatal(res.Err)
	}
	<-done
	if fp := req.Partitions[0]; fp.Err != nil || fp.Records.Size != 0 || fp.HighWatermark != 3 {
		t.Fatalf("parked consumer fetch at the HW: err %v, %d bytes, HW %d; want nothing below HW 3", fp.Err, fp.Records.Size, fp.HighWatermark)
	}
	req.Partitions[0].Records.Release()

	// Both followers report fetch offset 5, inside the batch [3, 6]: the HW moves to 5,
	// and that batch (offsets 3..6) must still not be served to consumers.
	for _, f := range followers {
		rep := &FetchRequest{ReplicaID: f.ID(), ReplicaEpoch: -1, MaxBytes: 1 << 20,
			Partitions: []FetchPartition{{Topic: "t", FetchOffset: 5, CurrentLeaderEpoch: -1, LogStartOffset: 0, MaxBytes: 1 << 20}}}
		l.Fetch(context.Background(), rep)
		rep.Partitions[0].Records.Release()
		if err := rep.Partitions[0].Err; err != nil {
			t.Fatalf("replica fetch of %d at 5: %v", f.ID(), err)
		}
	}
	if r, _ := l.Replica("t", 0); r.HW() != 5 {
		t.Fatalf("HW %d after both followers fetched at 5, want 5", r.HW())
	}
	checkConsumerView(t, l, []string{"a-0", "a-1", "a-2"})
}

// TestListOffsetsLatestIsTheHW pins ListOffsets against the leader whose LEO (9) is past its
// HW (3), as Kafka's KafkaApis.handleListOffsetRequest / Partition.fetchOffsetForTimestamp
// answer it: a consumer (replica id -1) gets the HW for LATEST, read_uncommitted and
// read_committed alike (no transactions: LSO = HW), and the first offset below the HW for
// a timestamp; a follower (replica id >= 0) and the debugging id -2 pass no isolation level
// and get the LEO; -2 is answered by a follower from its own log too.
func TestListOffsetsLatestIsTheHW(t *testing.T) {
	_, l, followers := leaderAheadOfHW(t)
	f := followers[0]
	fr, _ := f.Replica("t", 0)
	for _, tc := range []struct {
		name      string
		b         *Broker
		replicaID int32
		ts        int64
		isolation int8
		want      int64
	}{
		{"consumer latest read_uncommitted", l, -1, -1, 0, 3},
		{"consumer latest read_committed", l, -1, -1, 1, 3},
		{"consumer earliest", l, -1, -2, 0, 0},
		{"consumer by time below the HW", l, -1, 1000, 0, 0},
		{"consumer by time only past the HW", l, -1, 1500, 0, -1},
		{"follower latest", l, f.ID(), -1, 0, 7},
		{"follower by time", l, f.ID(), 1500, 0, 3},
		{"debugging latest on the leader", l, -2, -1, 0, 7},
		{"debugging latest on a follower", f, -2, -1, 0, fr.LEO()},
		{"debugging earliest on a follower", f, -2, -2, 0, 0},
	} {
		got, epoch, err := tc.b.ListOffsetFor(tc.replicaID, -1, "t", 0, tc.ts, tc.isolation)
		if err != nil || got != tc.want {
			t.Errorf("%s: ListOffsets(replica %d, timestamp %d) on broker %d = %d, %v; want %d",
				tc.name, tc.replicaID, tc.ts, tc.b.ID(), got, err, tc.want)
		}
		// Every batch is of the current leader epoch; no offset, no epoch.
		r, _ := tc.b.Replica("t", 0)
		if want := r.LeaderEpoch(); (got < 0 && epoch != -1) || (got >= 0 && epoch != want) {
			t.Errorf("%s: leader epoch %d with offset %d, want %d from the replica (-1 with no offset)", tc.name, epoch, got, want)
		}
	}
	if _, _, err := f.ListOffsetFor(-1, -1, "t", 0, -1, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("consumer ListOffsets on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if _, _, err := f.ListOffsetFor(l.ID(), -1, "t", 0, -1, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("replica ListOffsets on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// TestConsumerNeverReadsTruncatedRecords: the leader appends past its HW (acks=1 while its
// followers are paused), a consumer reads all it may, the leader dies and a follower is
// elected without those records; the new leader's records take their offsets, and the old
// leader, restarted, truncates them away. Every record the consumer read is still in every
// replica at its offset: it never saw one that was truncated.
func TestConsumerNeverReadsTruncatedRecords(t *testing.T) {
	c, old, followers := leaderAheadOfHW(t)
	read := map[int64]string{}
	pos := int64(0)
	consumeFrom := func(b *Broker) {
		t.Helper()
		for {
			bs, hw, err := consumerFetch(t, b, "t", 0, pos)
			if err != nil {
				t.Fatalf("consumer fetch at %d from broker %d: %v", pos, b.ID(), err)
			}
			for _, fb := range bs {
				for i, v := range fb.values {
					if off := fb.base + int64(i); off >= pos {
						read[off] = v
						pos = off + 1
					}
				}
			}
			if len(bs) == 0 || pos >= hw {
				return
			}
		}
	}
	consumeFrom(old)

	old.Kill()
	for _, f := range followers {
		f.Resume()
	}
	c.ctrl.BrokerDown(old.ID())
	var nl *Broker
	c.waitFor("a follower leads", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		if st.Leader < 0 || st.Leader == old.ID() {
			return false
		}
		r, ok := c.broker(st.Leader).Replica("t", 0)
		nl = c.broker(st.Leader)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch && r.HW() >= 3
	})
	if res := produce(t, nl, -1, "t", 0, batchAt("n", 2, 4000)); res.Err != nil || res.BaseOffset != 3 {
		t.Fatalf("acks=all on the new leader: %+v, want offsets 3..4", res)
	}
	consumeFrom(nl)

	c.start(old.ID())
	nr, _ := nl.Replica("t", 0)
	c.waitFor("the old leader truncated and caught up", 10*time.Second, func() bool {
		ob := c.broker(old.ID())
		or, ok := ob.Replica("t", 0)
		return ok && !or.IsLeader() && or.LEO() == nr.LEO() && or.HW() == nr.HW()
	})
	vals, _ := consume(t, nl, "t", 0, 0)
	for _, id := range c.ids() {
		logVals := valuesOf(t, c.broker(id), "t", 0, nr.HW())
		if !slices.Equal(logVals, vals) {
			t.Errorf("broker %d holds %v below the HW, the leader serves %v", id, logVals, vals)
		}
		for off, v := range read {
			if off >= int64(len(logVals)) || logVals[off] != v {
				t.Errorf("the consumer read %q at offset %d; broker %d now holds %v: a record it read was truncated", v, off, id, logVals)
			}
		}
	}
	for _, v := range read {
		if v[0] == 'b' {
			t.Errorf("the consumer read %q, appended past the HW by the old leader", v)
		}
	}
}

// valuesOf returns the record values of topic-p on b in [0, to), by offset.
func valuesOf(t *testing.T, b *Broker, topic string, p int32, to int64) []string {
	t.Helper()
	var vals []string
	err := records.Split(logBytes(t, b, topic, p, to), func(bb []byte, _ records.Header) error {
		return records.ForEachRecord(bb, func(_, _ int64, _, v []byte) error {
			vals = append(vals, string(v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestFollowerHWBoundedByLEOAndLeaderHW drives a real follower's fetcher with scripted
// leader answers: its HW is min(the leader's HW in the response, its own LEO) after every
// response, so it never passes its LEO (a response limited by replica.fetch.max.bytes with a
// leader HW far ahead) nor the leader's HW (a new leader's HW may be lower; the follower
// follows it), and after a truncation by leader epoch the HW is at most the new LEO before
// the next response applies the leader's.
func TestFollowerHWBoundedByLEOAndLeaderHW(t *testing.T) {
	ctrl, bs := manualBrokers(t, 3)
	states, err := ctrl.CreateTopic("t", 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := states[0]
	f, next := bs[st.Replicas[1]], bs[st.Replicas[2]]
	if st.Replicas[1] == st.Leader {
		f = bs[st.Replicas[0]]
	}
	if next == f || next.ID() == st.Leader {
		next = bs[st.Replicas[0]]
	}
	syncAll(t, ctrl, bs)
	r, _ := f.Replica("t", 0)
	check := func(step string, leaderHW int64) {
		t.Helper()
		if r.HW() > r.LEO() || r.HW() > leaderHW {
			t.Fatalf("%s: follower HW %d, LEO %d, leader HW %d: want HW <= min(LEO, leader HW)", step, r.HW(), r.LEO(), leaderHW)
		}
	}
	fetcherOf := func(source int32) *Fetcher {
		t.Helper()
		for _, fe := range f.Fetchers() {
			if fe.Source() == source && len(fe.Partitions()) > 0 {
				return fe
			}
		}
		t.Fatalf("no fetcher of broker %d from %d holds t-0", f.ID(), source)
		return nil
	}
	fe := fetcherOf(st.Leader)
	respond := func(fe *Fetcher, fetchOffset int64, blob []byte, leaderHW int64) {
		t.Helper()
		round := fe.Plan()
		if len(round.Fetch.Partitions) != 1 || round.Fetch.Partitions[0].FetchOffset != fetchOffset {
			t.Fatalf("round: epochs %v, fetch %+v; want a fetch at %d", round.Epochs, round.Fetch.Partitions, fetchOffset)
		}
		fe.ApplyFetch(round, []FetchPartition{{Topic: "t", Partition: 0, HighWatermark: leaderHW, LastStableOffset: leaderHW, LogStartOffsetOut: 0, RecordBytes: blob}})
	}
	// 1. Two batches [0, 5) while the leader's HW is 10 (its response was cut by the
	// fetch size): HW 5, not 10.
	blob := records.AppendBatch(nil, 0, 0, 1, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	blob = records.AppendBatch(blob, 3, 0, 1, []records.Record{{Value: []byte("d")}, {Value: []byte("e")}})
	respond(fe, 0, blob, 10)
	check("after a response with leader HW 10", 10)
	if r.LEO() != 5 || r.HW() != 5 {
		t.Fatalf("after [0, 5) with leader HW 10: LEO %d HW %d, want 5 and 5", r.LEO(), r.HW())
	}
	// 2. Nothing new, leader HW 4: the follower follows it down (Kafka's
	// maybeUpdateHighWatermark), never above the leader's.
	respond(fe, 5, nil, 4)
	check("after an empty response with leader HW 4", 4)
	if r.HW() != 4 {
		t.Fatalf("follower HW %d after the leader's HW 4, want 4", r.HW())
	}
	// 3. Leadership moves to the other follower, whose epoch 0 ended at 3: this follower
	// truncates to 3 (HW at most 3 right after), then fetches [3, 4) of epoch 1 with the
	// new leader's HW 4.
	if _, err := ctrl.TransferLeader("t", 0, next.ID()); err != nil {
		t.Fatal(err)
	}
	syncAll(t, ctrl, bs)
	fe = fetcherOf(next.ID())
	round := fe.Plan()
	if len(round.Epochs) != 1 || round.Epochs[0].LeaderEpoch != 0 {
		t.Fatalf("after the leader change: epochs %v fetch %v, want OffsetForLeaderEpoch(0)", round.Epochs, round.Fetch.Partitions)
	}
	fe.ApplyEpochs(round, []EpochAnswer{{Topic: "t", Partition: 0, LeaderEpoch: 0, EndOffset: 3}})
	if r.LEO() != 3 {
		t.Fatalf("after truncation by epoch: LEO %d, want 3", r.LEO())
	}
	check("after truncation to 3", 4)
	respond(fe, 3, records.AppendBatch(nil, 3, 1, 1, []records.Record{{Value: []byte("n")}}), 4)
	check("after [3, 4) with leader HW 4", 4)
	if r.LEO() != 4 || r.HW() != 4 {
		t.Fatalf("after [3, 4) with leader HW 4: LEO %d HW %d, want 4 and 4", r.LEO(), r.HW())
	}
}

// manualBrokers starts n Config.Manual brokers (no goroutines: the test runs the fetchers'
// rounds) with a controller delivering changes; all are closed at cleanup.
func manualBrokers(t *testing.T, n int) (*controller.Controller, map[int32]*Broker) {
	t.Helper()
	ctrl := controller.New(controller.DefaultConfig())
	t.Cleanup(func() { ctrl.Close() })
	cfg := testConfig()
	cfg.Manual = true
	bs := map[int32]*Broker{}
	for id := int32(0); id < int32(n); id++ {
		c := cfg
		c.ID, c.DataDir = id, t.TempDir()
		b, err := New(c, ctrl, scriptTransport{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs[id] = b
	}
	return ctrl, bs
}

// syncAll waits until every broker applied every controller change.
func syncAll(t *testing.T, ctrl *controller.Controller, bs map[int32]*Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id := range bs {
		if err := ctrl.Sync(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
