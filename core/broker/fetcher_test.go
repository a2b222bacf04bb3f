package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// scriptConn is a FetchConn driven by the test: every call is handed to
// the test through calls, which answers through the call's reply channel.
type scriptConn struct{ calls chan *scriptCall }

type scriptCall struct {
	fetch   *FetchRequest // copy
	epochs  []EpochQuery
	offsets []OffsetQuery
	reply   chan scriptReply
}

type scriptReply struct {
	fetch   []FetchPartition
	epochs  []EpochAnswer
	offsets []OffsetAnswer
	err     error
}

func (c *scriptConn) ListOffsets(ctx context.Context, replicaID int32, q []OffsetQuery) ([]OffsetAnswer, error) {
	call := &scriptCall{offsets: append([]OffsetQuery(nil), q...), reply: make(chan scriptReply, 1)}
	select {
	case c.calls <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-call.reply:
		return r.offsets, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *scriptConn) Fetch(ctx context.Context, req *FetchRequest) ([]FetchPartition, error) {
	cp := *req
	cp.Partitions = append([]FetchPartition(nil), req.Partitions...)
	call := &scriptCall{fetch: &cp, reply: make(chan scriptReply, 1)}
	select {
	case c.calls <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-call.reply:
		return r.fetch, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *scriptConn) OffsetForLeaderEpoch(ctx context.Context, q []EpochQuery) ([]EpochAnswer, error) {
	call := &scriptCall{epochs: append([]EpochQuery(nil), q...), reply: make(chan scriptReply, 1)}
	select {
	case c.calls <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-call.reply:
		return r.epochs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *scriptConn) Close() error { return nil }

type scriptTransport struct{ conn *scriptConn }

func (t scriptTransport) Dial(ctx context.Context, source int32, idx int) (FetchConn, error) {
	return t.conn, nil
}

// TestFetcherOffsetOutOfRange scripts a leader against one real follower:
// OFFSET_OUT_OF_RANGE -> the follower asks the leader for its log start and end
// (ListOffsets as a replica: the error response carries no log start on the wire);
// below the leader's log start it restarts its log there; above the leader's LEO it
// truncates to it; a connection error -> re-dial.
func TestFetcherOffsetOutOfRange(t *testing.T) {
	// Brokers 0 and 1 are scripted; broker 2 is the real follower.
	ctrl := controller.New(controller.DefaultConfig())
	for id := int32(0); id < 3; id++ {
		ctrl.RegisterBroker(controller.Registration{ID: id, Host: "127.0.0.1", Port: 9092 + id})
	}
	states, err := ctrl.CreateTopic("t", 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	const p = 0
	if states[0].Leader != 0 || states[0].Replicas[1] != 1 {
		t.Fatalf("placement changed: %v", states[0])
	}
	conn := &scriptConn{calls: make(chan *scriptCall)}
	cfg := testConfig()
	cfg.ID, cfg.DataDir = 2, t.TempDir()
	cfg.ReplicaFetchBackoffMs = 1
	b, err := New(cfg, ctrl, scriptTransport{conn})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r, ok := b.Replica("t", p)
	if !ok {
		t.Fatal("replica not opened")
	}
	// next returns the next call for partition p (answering others empty).
	next := func() *scriptCall {
		t.Helper()
		timeout := time.NewTimer(10 * time.Second)
		defer timeout.Stop()
		for {
			select {
			case c := <-conn.calls:
				if c.fetch != nil {
					for _, fp := range c.fetch.Partitions {
						if fp.Partition == p {
							return c
						}
					}
					c.reply <- scriptReply{fetch: []FetchPartition{}}
					continue
				}
				return c
			case <-timeout.C:
				t.Fatal("no call from the fetcher")
			}
		}
	}
	fetchOf := func(c *scriptCall) FetchPartition {
		t.Helper()
		if c.fetch == nil {
			t.Fatalf("expected a Fetch, got OffsetForLeaderEpoch %v", c.epochs)
		}
		for _, fp := range c.fetch.Partitions {
			if fp.Partition == p {
				return fp
			}
		}
		panic("unreachable")
	}
	reply := func(c *scriptCall, res FetchPartition) {
		res.Topic, res.Partition = "t", p
		c.reply <- scriptReply{fetch: []FetchPartition{res}}
	}

	// 1. Empty follower fetches at 0; the leader's log starts at 100.
	c := next()
	if fp := fetchOf(c); fp.FetchOffset != 0 || fp.CurrentLeaderEpoch != 0 || c.fetch.ReplicaID != 2 || c.fetch.MaxWait != time.Duration(cfg.ReplicaFetchWaitMaxMs)*time.Millisecond {
		t.Fatalf("first fetch %+v", c.fetch)
	}
	reply(c, FetchPartition{Err: fmt.Errorf("%w: below log start", kerr.OffsetOutOfRange), HighWatermark: -1, LogStartOffsetOut: -1})
	offsets := func(start, end int64) {
		t.Helper()
		c := next()
		if len(c.offsets) != 2 || c.offsets[0].Timestamp != -2 || c.offsets[1].Timestamp != -1 || c.offsets[0].CurrentLeaderEpoch != 0 {
			t.Fatalf("expected ListOffsets(earliest, latest), got fetch %+v epochs %+v offsets %+v", c.fetch, c.epochs, c.offsets)
		}
		c.reply <- scriptReply{offsets: []OffsetAnswer{
			{Topic: "t", Partition: p, Timestamp: -2, Offset: start},
			{Topic: "t", Partition: p, Timestamp: -1, Offset: end}}}
	}
	offsets(100, 150)

	// 2. It restarts at 100 and receives a 3-record batch.
	c = next()
	if fp := fetchOf(c); fp.FetchOffset != 100 {
		t.Fatalf("after OOR below log start: fetch offset %d, want 100", fp.FetchOffset)
	}
	if r.LogStart() != 100 || r.LEO() != 100 {
		t.Fatalf("log start %d LEO %d, want 100 100", r.LogStart(), r.LEO())
	}
	recs := []records.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	reply(c, FetchPartition{RecordBytes: records.AppendBatch(nil, 100, 0, 1, recs), HighWatermark: 102, LogStartOffsetOut: 100})

	// 3. Next fetch at 103; now the leader says 103 is beyond its LEO.
	c = next()
	if fp := fetchOf(c); fp.FetchOffset != 103 {
		t.Fatalf("fetch offset %d, want 103", fp.FetchOffset)
	}
	if r.HW() != 102 {
		t.Fatalf("follower HW %d, want min(leader HW 102, LEO 103)", r.HW())
	}
	reply(c, FetchPartition{Err: fmt.Errorf("%w: above LEO", kerr.OffsetOutOfRange), HighWatermark: -1, LogStartOffsetOut: -1})

	// 4. It asks for the leader's log start and end: its LEO is 100.
	offsets(100, 100)

	// 5. Truncated to 100; a connection error makes it re-dial and refetch.
	c = next()
	if fp := fetchOf(c); fp.FetchOffset != 100 || r.LEO() != 100 || r.HW() != 100 {
		t.Fatalf("after OOR above LEO: fetch offset %d LEO %d HW %d, want 100", fp.FetchOffset, r.LEO(), r.HW())
	}
	c.reply <- scriptReply{err: errors.New("connection reset")}
	c = next()
	if fp := fetchOf(c); fp.FetchOffset != 100 {
		t.Fatalf("after connection error: fetch offset %d", fp.FetchOffset)
	}
	// 6. FENCED_LEADER_EPOCH: the partition stops fetching until new
	// metadata; the leader moves to broker 1 at epoch 1 and the follower
	// fetches from it (its log is empty at 100: no epoch to ask about, so
	// it truncates to its HW locally).
	reply(c, FetchPartition{Err: kerr.FencedLeaderEpoch, HighWatermark: -1, LogStartOffsetOut: -1})
	ctrl.BrokerDown(0)
	c = next()
	if fp := fetchOf(c); fp.CurrentLeaderEpoch != 1 || fp.FetchOffset != 100 {
		t.Fatalf("fetch after leader change %+v", fp)
	}
	reply(c, FetchPartition{HighWatermark: 100, LogStartOffsetOut: 100})
}

// TestFirstRoundFetchesAfterLocalTruncation: a new follower (no local epoch) truncates
// without asking the leader and must fetch in the same round; an empty round would park
// its fetcher goroutine until some unrelated wake-up.
func TestFirstRoundFetchesAfterLocalTruncation(t *testing.T) {
	_, f := manualFollower(t, nil)
	if r := f.Plan(); len(r.Epochs) != 0 || len(r.Fetch.Partitions) != 1 {
		t.Fatalf("first round: %d epoch questions, %d fetch partitions; want a fetch of t-0", len(r.Epochs), len(r.Fetch.Partitions))
	}
}

// manualFollower starts two Config.Manual brokers over fsys (nil: the OS) with topic t
// (one partition, both brokers its replicas) and returns the follower, once it learnt its
// role, and its one fetcher. The brokers are closed at the test's cleanup.
func manualFollower(t *testing.T, fsys vfs.FS) (*Broker, *Fetcher) {
	t.Helper()
	return manualFollowerN(t, fsys, 1)
}

// manualFollowerN is manualFollower over topic "t" with n partitions, RF 2: the follower's
// one fetcher follows the partitions the other broker leads.
func manualFollowerN(t testing.TB, fsys vfs.FS, n int32) (*Broker, *Fetcher) {
	t.Helper()
	ctrl := controller.New(controller.DefaultConfig())
	t.Cleanup(func() { ctrl.Close() })
	cfg := testConfig()
	cfg.Manual = true
	cfg.FS = fsys
	var bs []*Broker
	for id := int32(0); id < 2; id++ {
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
		bs = append(bs, b)
	}
	states, err := ctrl.CreateTopic("t", n, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	follower := bs[states[0].Replicas[1]]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Duration(n)*20*time.Millisecond)
	defer cancel()
	if err := ctrl.Sync(ctx, follower.ID()); err != nil {
		t.Fatal(err)
	}
	fs := follower.Fetchers()
	if len(fs) != 1 {
		t.Fatalf("follower has %d fetchers, want 1", len(fs))
	}
	return follower, fs[0]
}

// TestFollowerAppendHoldsNoFetcherLock: a follower append blocked in the disk leaves the
// fetcher's partition map readable (its mutex is released around the write), and removing
// the partition from the fetcher waits for the write: when removeFromFetchers returns, the
// append has completed and the fetcher no longer touches the partition.
func TestFollowerAppendHoldsNoFetcherLock(t *testing.T) {
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	efs := vfs.NewErrorFS(nil)
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasSuffix(path, ".log") && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	follower, f := manualFollower(t, efs)
	defer unblock() // runs before the brokers' cleanup: a failing test must not leave the write blocked
	r := f.Plan()
	if len(r.Fetch.Partitions) != 1 || r.Fetch.Partitions[0].FetchOffset != 0 {
		t.Fatalf("first round %+v, want a fetch of t-0 at 0", r.Fetch)
	}
	rep, _ := follower.Replica("t", 0)
	recs := []records.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	resp := []FetchPartition{{Topic: "t", Partition: 0,
		RecordBytes: records.AppendBatch(nil, 0, 0, 1, recs), HighWatermark: 3, LogStartOffsetOut: 0}}
	armed.Store(true)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		f.ApplyFetch(r, resp)
	}()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	select {
	case <-entered:
	case <-deadline.C:
		t.Fatal("the follower append did not reach the disk")
	}
	// The write is blocked: the fetcher's partitions can still be read.
	listed := make(chan []FetcherPartition, 1)
	go func() { listed <- f.Partitions() }()
	select {
	case ps := <-listed:
		if len(ps) != 1 || ps[0].Topic != "t" || ps[0].Partition != 0 {
			t.Fatalf("fetcher partitions %+v, want t-0", ps)
		}
	case <-deadline.C:
		t.Fatal("Fetcher.Partitions blocked behind a follower append: the fetcher's mutex is held across disk I/O")
	}
	// Removing the partition waits for the write.
	removedAt := make(chan int64, 1)
	go func() {
		follower.apply.Lock()
		defer follower.apply.Unlock()
		follower.removeFromFetchers(tp{"t", 0})
		removedAt <- rep.LEO()
	}()
	unblock()
	select {
	case <-applied:
	case <-deadline.C:
		t.Fatal("ApplyFetch did not return after the write was released")
	}
	select {
	case leo := <-removedAt:
		if leo != 3 {
			t.Fatalf("removeFromFetchers returned with the replica's LEO at %d, want 3: it did not wait for the append in progress", leo)
		}
	case <-deadline.C:
		t.Fatal("removeFromFetchers did not return")
	}
	if ps := f.Partitions(); len(ps) != 0 {
		t.Fatalf("fetcher partitions after removal %+v, want none", ps)
	}
	if rep.LEO() != 3 || rep.HW() != 3 {
		t.Fatalf("follower LEO %d HW %d, want 3 3", rep.LEO(), rep.HW())
	}
}

// TestFetcherReusesIdlePlan: a round after an answer with nothing new reuses the last plan
// (FetchRequest.Reused, the same partitions and positions, none Moved); an answer with
// records reuses it too, with the partition's entry reread at its new LEO (Moved); an error
// or a failed round makes the next round plan afresh from the replica's new position.
func TestFetcherReusesIdlePlan(t *testing.T) {
	follower, f := manualFollower(t, nil)
	rep, _ := follower.Replica("t", 0)
	r := f.Plan()
	if r.Fetch.Reused || len(r.Fetch.Partitions) != 1 || r.Fetch.Partitions[0].FetchOffset != 0 {
		t.Fatalf("first round %+v, want a fresh fetch of t-0 at 0", r.Fetch)
	}
	// The first round also truncated (a new replica without a local epoch): the next one is
	// planned afresh, and the one after reuses it.
	f.ApplyFetch(r, nil) // nothing new (a session's empty answer)
	if r = f.Plan(); r.Fetch.Reused {
		t.Fatal("the round after a truncation reused the plan")
	}
	f.ApplyFetch(r, nil)
	if r = f.Plan(); !r.Fetch.Reused || len(r.Fetch.Moved) != 0 || len(r.Fetch.Partitions) != 1 || r.Fetch.Partitions[0].FetchOffset != 0 {
		t.Fatalf("idle round %+v (reused %v, moved %v), want the last plan reused", r.Fetch.Partitions, r.Fetch.Reused, r.Fetch.Moved)
	}
	f.ApplyFetch(r, []FetchPartition{{Topic: "t", Partition: 0, HighWatermark: 0, LogStartOffsetOut: 0}}) // HW only: still idle
	if r = f.Plan(); !r.Fetch.Reused || len(r.Fetch.Moved) != 0 {
		t.Fatalf("a round after an answer without records, error or log start change: reused %v moved %v, want the plan as it was", r.Fetch.Reused, r.Fetch.Moved)
	}
	recs := []records.Record{{Value: []byte("a")}, {Value: []byte("b")}}
	f.ApplyFetch(r, []FetchPartition{{Topic: "t", Partition: 0, RecordBytes: records.AppendBatch(nil, 0, 0, 1, recs), HighWatermark: 2, LogStartOffsetOut: 0}})
	if rep.LEO() != 2 {
		t.Fatalf("follower LEO %d after the append, want 2", rep.LEO())
	}
	if r = f.Plan(); !r.Fetch.Reused || !slices.Equal(r.Fetch.Moved, []int{0}) || r.Fetch.Partitions[0].FetchOffset != 2 {
		t.Fatalf("round after records: reused %v moved %v at %d, want the plan reused with t-0 moved to the new LEO 2", r.Fetch.Reused, r.Fetch.Moved, r.Fetch.Partitions[0].FetchOffset)
	}
	f.ApplyFetch(r, nil)
	if r = f.Plan(); !r.Fetch.Reused || len(r.Fetch.Moved) != 0 || r.Fetch.Partitions[0].FetchOffset != 2 {
		t.Fatalf("idle again: reused %v moved %v at %d, want the plan reused at 2", r.Fetch.Reused, r.Fetch.Moved, r.Fetch.Partitions[0].FetchOffset)
	}
	f.ApplyFetch(r, []FetchPartition{{Topic: "t", Partition: 0, Err: kerr.UnknownServerError}})
	if r = f.Plan(); r.Fetch.Reused {
		t.Fatal("the round after an error answer reused the plan")
	}
	f.Failed(r)
	if r = f.Plan(); r.Fetch.Reused || len(r.Fetch.Partitions) != 0 || r.Wait <= 0 {
		t.Fatalf("after a failed round: reused %v, %d partitions, wait %v; want a fresh plan backing off", r.Fetch.Reused, len(r.Fetch.Partitions), r.Wait)
	}
}
