package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// tcluster is brokers in Manual mode on MemFS disks, a controller with manual delivery, one
// Coordinator (Manual) per broker and a virtual clock: the test decides when a follower
// fetches, when a broker learns of a metadata change and when the coordinators scan, so
// every interleaving it builds is deterministic.
type tcluster struct {
	t    *testing.T
	now  int64 // ns
	cfg  Config
	ctrl *controller.Controller
	fss  []*vfs.MemFS
	bs   []*broker.Broker // nil: down
	cs   []*Coordinator
	rs   []broker.ReplicaServe
	ids  int
}

// newTCluster starts n brokers and creates __consumer_offsets with one partition and rf
// replicas (min.insync.replicas as OffsetsTopicConfigs gives it), led by broker 0.
func newTCluster(t *testing.T, n int, rf int16) *tcluster {
	t.Helper()
	c := &tcluster{t: t, now: int64(1_700_000_000) * int64(time.Second)}
	c.cfg = DefaultConfig()
	c.cfg.Manual = true
	c.cfg.InitialRebalanceDelayMs = 0
	c.cfg.OffsetsTopicNumPartitions = 1
	c.cfg.OffsetsTopicReplicationFactor = rf
	c.cfg.NewMemberID = func(client string) string { c.ids++; return client + "-" + strconv.Itoa(c.ids) }
	if testing.Verbose() {
		c.cfg.Logf = t.Logf
	}
	c.ctrl = controller.New(controller.Config{BrokerSessionTimeoutMs: 1 << 40, Now: func() int64 { return c.now }, ManualDelivery: true})
	c.fss = make([]*vfs.MemFS, n)
	c.bs = make([]*broker.Broker, n)
	c.cs = make([]*Coordinator, n)
	c.rs = make([]broker.ReplicaServe, n)
	for i := range n {
		c.fss[i] = vfs.NewMemFS(func() time.Time { return time.Unix(0, c.now) })
		c.start(int32(i))
	}
	if _, err := EnsureOffsetsTopic(c.ctrl, c.cfg); err != nil {
		t.Fatal(err)
	}
	c.settle()
	t.Cleanup(func() {
		for i := range c.bs {
			c.stop(int32(i))
		}
	})
	return c
}

func (c *tcluster) nowMs() int64 { return c.now / int64(time.Millisecond) }

// advance moves the clock by ms.
func (c *tcluster) advance(ms int64) { c.now += ms * int64(time.Millisecond) }

// start starts (a new incarnation of) broker id with its coordinator.
func (c *tcluster) start(id int32) {
	c.t.Helper()
	cfg := broker.DefaultConfig()
	cfg.ID = id
	cfg.DataDir = fmt.Sprintf("/broker-%d", id)
	cfg.FS = c.fss[id]
	cfg.Manual = true
	cfg.Now = func() int64 { return c.now }
	cfg.ReplicaFetchWaitMaxMs = 0
	cfg.ReplicaLagTimeMaxMs = 1 << 40
	cfg.Logf = func(string, ...any) {}
	b, err := broker.New(cfg, c.ctrl, noTransport{})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.bs[id] = b
	c.cs[id] = NewCoordinator(c.cfg, b, c.ctrl, c.nowMs)
	c.cs[id].Start()
}

// stop kills broker id (its page cache survives, as a killed process's does) and tells the
// controller.
func (c *tcluster) stop(id int32) {
	if c.bs[id] == nil {
		return
	}
	c.cs[id].Close()
	c.bs[id].Kill()
	c.bs[id], c.cs[id] = nil, nil
	c.ctrl.BrokerDown(id)
}

type noTransport struct{}

func (noTransport) Dial(context.Context, int32, int) (broker.FetchConn, error) {
	return nil, fmt.Errorf("group test: fetchers are driven by the test")
}

// deliver hands every running broker its pending metadata changes, then lets every
// coordinator scan its leaderships.
func (c *tcluster) deliver() {
	for i, b := range c.bs {
		if b != nil {
			c.ctrl.DeliverPending(int32(i), 1<<20)
		}
	}
	c.scan()
}

func (c *tcluster) scan() {
	for _, co := range c.cs {
		if co != nil {
			co.Scan()
		}
	}
}

// round runs one fetch round of every fetcher of broker id against its source, at once.
func (c *tcluster) round(id int32) {
	b := c.bs[id]
	for _, f := range b.Fetchers() {
		r := f.Plan()
		if r.Empty() {
			continue
		}
		src := c.bs[f.Source()]
		if src == nil {
			f.Failed(r)
			continue
		}
		if len(r.Epochs) > 0 {
			f.ApplyEpochs(r, broker.ServeEpochs(src, slices.Clone(r.Epochs)))
		}
		if len(r.Offsets) > 0 {
			f.ApplyOffsets(r, broker.ServeOffsets(src, id, slices.Clone(r.Offsets)))
		}
		if len(r.Fetch.Partitions) > 0 {
			req := r.Fetch
			req.Partitions = slices.Clone(r.Fetch.Partitions)
			got, err := c.rs[f.Source()].Fetch(context.Background(), src, &req)
			if err != nil {
				c.t.Fatalf("broker %d serving broker %d: %v", f.Source(), id, err)
			}
			resp := slices.Clone(got)
			for i := range resp {
				resp[i].RecordBytes = slices.Clone(resp[i].RecordBytes)
			}
			f.ApplyFetch(r, resp)
		}
	}
}

// pump runs n fetch rounds of every running broker, with the ISR changes they lead to, and
// ends the acks=all waits that are over.
func (c *tcluster) pump(n int) {
	for range n {
		c.advance(10)
		for i, b := range c.bs {
			if b != nil {
				c.round(int32(i))
			}
		}
		for _, b := range c.bs {
			if b != nil {
				b.ApplyExpansions()
			}
		}
		c.deliver()
		c.poll()
	}
}

func (c *tcluster) poll() {
	for _, co := range c.cs {
		if co != nil {
			co.Poll()
		}
	}
}

// settle delivers the metadata and pumps until the followers caught up.
func (c *tcluster) settle() {
	c.deliver()
	c.pump(6)
}

// leader is the broker id leading __consumer_offsets-0 per the controller.
func (c *tcluster) leader() int32 {
	st, _ := c.ctrl.Partition(OffsetsTopic, 0)
	return st.Leader
}

// commit commits offs for group g (generation -1 unless gen is given) on coordinator id and
// pumps until the answer; it returns it.
func (c *tcluster) commit(id int32, req CommitRequest, offs map[TP]Committed) error {
	c.t.Helper()
	var got error
	answered := false
	c.cs[id].CommitAsync(req, offs, func(err error) { got, answered = err, true })
	for i := 0; i < 20 && !answered; i++ {
		c.pump(1)
	}
	if !answered {
		c.t.Fatalf("commit to broker %d not answered", id)
	}
	return got
}

// committed is OffsetFetch of every partition of g on coordinator id.
func (c *tcluster) committed(id int32, g string) (map[TP]Committed, error) {
	return c.cs[id].Committed(g, nil)
}

// joinSync runs one member's JoinGroup (a second one after MEMBER_ID_REQUIRED) and
// SyncGroup on coordinator id; the member leads if it is alone.
func (c *tcluster) joinSync(id int32, req JoinRequest) (JoinResult, SyncResult) {
	c.t.Helper()
	var jr JoinResult
	joined := false
	c.cs[id].JoinAsync(req, func(r JoinResult) { jr, joined = r, true })
	if joined && jr.Err != nil && req.MemberID == "" && req.InstanceID == "" {
		req.MemberID = jr.MemberID
		joined = false
		c.cs[id].JoinAsync(req, func(r JoinResult) { jr, joined = r, true })
	}
	for i := 0; i < 20 && !joined; i++ {
		c.advance(100)
		c.cs[id].Tick()
		c.pump(1)
	}
	if !joined || jr.Err != nil {
		c.t.Fatalf("JoinGroup on broker %d: %+v (answered %v)", id, jr, joined)
	}
	var sr SyncResult
	synced := false
	sreq := SyncRequest{Group: req.Group, Generation: jr.Generation, MemberID: jr.MemberID, InstanceID: req.InstanceID}
	if jr.Leader == jr.MemberID {
		sreq.Assignments = map[string][]byte{}
		for _, m := range jr.Members {
			sreq.Assignments[m.MemberID] = []byte("assignment-of-" + m.MemberID)
		}
	}
	c.cs[id].SyncAsync(sreq, func(r SyncResult) { sr, synced = r, true })
	for i := 0; i < 20 && !synced; i++ {
		c.pump(1)
	}
	if !synced {
		c.t.Fatalf("SyncGroup on broker %d not answered", id)
	}
	return jr, sr
}

// TestManualCoordinator: in Manual mode the coordinator starts no goroutine and serves a
// group through the Async methods: a member joins, syncs and commits with acks=all (its
// answer comes once the followers fetched), the committed offset is served, and a
// coordinator on another broker serves it after the leadership moves there.
func TestManualCoordinator(t *testing.T) {
	c := newTCluster(t, 3, 3)
	if err := c.cs[0].Check("g"); err != nil {
		t.Fatalf("coordinator 0 after the load: %v", err)
	}
	jr, sr := c.joinSync(0, joinReq("", ""))
	if jr.Generation != 1 || sr.Err != nil || string(sr.Assignment) != "assignment-of-"+jr.MemberID {
		t.Fatalf("join %+v sync %+v", jr, sr)
	}
	tp := TP{"t", 0}
	err := c.commit(0, CommitRequest{Group: "g", Generation: jr.Generation, MemberID: jr.MemberID}, map[TP]Committed{tp: {Offset: 42, LeaderEpoch: -1}})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if offs, err := c.committed(0, "g"); err != nil || offs[tp].Offset != 42 {
		t.Fatalf("OffsetFetch on broker 0: %v, %v", offs, err)
	}
	if _, err := c.ctrl.TransferLeader(OffsetsTopic, 0, 1); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if err := c.cs[0].Check("g"); err == nil {
		t.Fatal("broker 0 still serves the group after the leadership moved")
	}
	if offs, err := c.committed(1, "g"); err != nil || offs[tp].Offset != 42 {
		t.Fatalf("OffsetFetch on broker 1 after the move: %v, %v", offs, err)
	}
	if err := c.cs[1].Heartbeat("g", jr.MemberID, "", jr.Generation); err != nil {
		t.Fatalf("heartbeat on the new coordinator: %v", err)
	}
}

// TestCommitAcrossCoordinatorReload: the coordinator moves away and back (a reload in a new
// leader epoch) while a commit is between its validation and its acknowledgement. The
// acknowledged commit must be what OffsetFetch then returns: Kafka holds the group lock from
// the validation through the append, so a reload either precedes the validation or reads the
// record. The commit is the first of a group that exists only through it (generation -1),
// so a reload that misses the record knows nothing of the group.
func TestCommitAcrossCoordinatorReload(t *testing.T) {
	c := newTCluster(t, 2, 2)
	tp := TP{"t", 0}
	moved := false
	c.cs[0].hooks.commitUnlocked = func() {
		c.cs[0].hooks.commitUnlocked = nil
		c.pump(2) // what was appended so far is replicated and acknowledged
		for _, to := range []int32{1, 0} {
			if _, err := c.ctrl.TransferLeader(OffsetsTopic, 0, to); err != nil {
				t.Fatal(err)
			}
			c.settle()
		}
		moved = c.leader() == 0 && c.cs[0].Check("standalone") == nil
	}
	if err := c.commit(0, CommitRequest{Group: "standalone", Generation: -1}, map[TP]Committed{tp: {Offset: 7, LeaderEpoch: -1}}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if !moved {
		t.Fatal("the coordinator did not move away and back to broker 0 during the commit")
	}
	offs, err := c.committed(0, "standalone")
	if err != nil || offs[tp].Offset != 7 {
		t.Fatalf("OffsetFetch after the acknowledged commit: %v, %v: want offset 7", offs, err)
	}
}

// TestOffsetFetchNotStaleAfterUnseenMove: the leadership of the group's partition moves away
// and back before this broker's coordinator has looked (a scan follows every change, but
// changes can come faster). A commit acknowledged by the other coordinator meanwhile must
// not be hidden by the state loaded for the earlier leadership: OffsetFetch answers
// COORDINATOR_LOAD_IN_PROGRESS until the reload.
func TestOffsetFetchNotStaleAfterUnseenMove(t *testing.T) {
	c := newTCluster(t, 2, 2)
	tp := TP{"t", 0}
	commit := func(id int32, off int64) {
		t.Helper()
		if err := c.commit(id, CommitRequest{Group: "g", Generation: -1}, map[TP]Committed{tp: {Offset: off, LeaderEpoch: -1}}); err != nil {
			t.Fatalf("commit %d on broker %d: %v", off, id, err)
		}
	}
	commit(0, 1)
	// Broker 0 follows the moves; its coordinator does not scan until the end.
	step := func() {
		c.advance(50)
		for i, b := range c.bs {
			c.ctrl.DeliverPending(int32(i), 1<<20)
			c.round(int32(i))
			b.ApplyExpansions()
		}
		c.cs[1].Scan()
		c.poll()
	}
	if _, err := c.ctrl.TransferLeader(OffsetsTopic, 0, 1); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		step()
	}
	var got error
	answered := false
	c.cs[1].CommitAsync(CommitRequest{Group: "g", Generation: -1}, map[TP]Committed{tp: {Offset: 2, LeaderEpoch: -1}}, func(err error) { got, answered = err, true })
	for i := 0; i < 10 && !answered; i++ {
		step()
	}
	if !answered || got != nil {
		t.Fatalf("commit on broker 1: answered %v, %v", answered, got)
	}
	if _, err := c.ctrl.TransferLeader(OffsetsTopic, 0, 0); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		step()
	}
	if r, _ := c.bs[0].Replica(OffsetsTopic, 0); !r.IsLeader() {
		t.Fatal("broker 0 does not lead again")
	}
	offs, err := c.committed(0, "g")
	if err == nil && offs[tp].Offset != 2 {
		t.Fatalf("OffsetFetch on broker 0 before its coordinator reloaded: offset %d (the state of its earlier leadership), want 2 or COORDINATOR_LOAD_IN_PROGRESS", offs[tp].Offset)
	}
	c.cs[0].Scan()
	if offs, err := c.committed(0, "g"); err != nil || offs[tp].Offset != 2 {
		t.Fatalf("OffsetFetch on broker 0 after the reload: %v, %v", offs, err)
	}
}

// TestLoadWhileISRBelowMin: the coordinator moves to a broker whose HW is behind its log end
// while the __consumer_offsets ISR is below min.insync.replicas (the HW cannot advance). As
// Kafka's GroupMetadataManager, the new coordinator loads up to the log end without waiting
// for the HW: it serves the group and the commits the previous coordinator acknowledged,
// and a new commit fails with COORDINATOR_NOT_AVAILABLE (NOT_ENOUGH_REPLICAS).
func TestLoadWhileISRBelowMin(t *testing.T) {
	c := newTCluster(t, 3, 3)
	jr, _ := c.joinSync(0, joinReq("", ""))
	tp := TP{"t", 0}
	member := CommitRequest{Group: "g", Generation: jr.Generation, MemberID: jr.MemberID}
	for _, off := range []int64{5, 6} {
		if err := c.commit(0, member, map[TP]Committed{tp: {Offset: off, LeaderEpoch: -1}}); err != nil {
			t.Fatalf("commit %d: %v", off, err)
		}
	}
	r1, _ := c.bs[1].Replica(OffsetsTopic, 0)
	if r1.HW() >= r1.LEO() {
		t.Fatalf("broker 1 HW %d, LEO %d: the test needs a follower whose HW lags its log end", r1.HW(), r1.LEO())
	}
	c.stop(2)
	c.stop(0)
	c.settle()
	if st, _ := c.ctrl.Partition(OffsetsTopic, 0); st.Leader != 1 || len(st.ISR) != 1 {
		t.Fatalf("__consumer_offsets-0: %v, want leader 1 alone in the ISR", st)
	}
	r1, _ = c.bs[1].Replica(OffsetsTopic, 0)
	if r1.HW() >= r1.LEO() {
		t.Fatalf("broker 1 HW %d reached its LEO %d with the ISR below min.insync.replicas", r1.HW(), r1.LEO())
	}
	if err := c.cs[1].Check("g"); err != nil {
		t.Fatalf("the new coordinator does not serve the group: %v", err)
	}
	if offs, err := c.committed(1, "g"); err != nil || offs[tp].Offset != 6 {
		t.Fatalf("OffsetFetch on the new coordinator: %v, %v: want the acknowledged offset 6", offs, err)
	}
	if err := c.cs[1].Heartbeat("g", jr.MemberID, "", jr.Generation); err != nil {
		t.Fatalf("heartbeat on the new coordinator: %v", err)
	}
	if err := c.commit(1, member, map[TP]Committed{tp: {Offset: 7, LeaderEpoch: -1}}); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("commit with the ISR below min.insync.replicas: %v, want COORDINATOR_NOT_AVAILABLE", err)
	}
}

// TestExpiredOffsetsTombstonedForReload: an expired offset is gone from OffsetFetch, and the
// tombstone the coordinator writes makes a coordinator that loads the partition afterwards
// drop it too, before its own first retention check.
func TestExpiredOffsetsTombstonedForReload(t *testing.T) {
	c := newTCluster(t, 2, 2)
	tp, kept := TP{"t", 0}, TP{"t", 1}
	req := CommitRequest{Group: "g", Generation: -1}
	if err := c.commit(0, req, map[TP]Committed{tp: {Offset: 5, LeaderEpoch: -1, CommitTimestamp: c.nowMs()}}); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * 24 * 3600 * 1000)
	if err := c.commit(0, req, map[TP]Committed{kept: {Offset: 9, LeaderEpoch: -1, CommitTimestamp: c.nowMs()}}); err != nil {
		t.Fatal(err)
	}
	// offsets.retention.minutes after the first commit, with the retention checks on the way.
	for end := c.nowMs() + 5*24*3600*1000 + 600000; c.nowMs() < end; {
		c.advance(600000)
		c.cs[0].Tick()
	}
	c.pump(3)
	offs, err := c.committed(0, "g")
	if err != nil || len(offs) != 1 || offs[kept].Offset != 9 {
		t.Fatalf("OffsetFetch after the first commit expired: %v, %v: want only %v", offs, err, kept)
	}
	if _, err := c.ctrl.TransferLeader(OffsetsTopic, 0, 1); err != nil {
		t.Fatal(err)
	}
	c.settle()
	offs, err = c.committed(1, "g")
	if err != nil || len(offs) != 1 || offs[kept].Offset != 9 {
		t.Fatalf("OffsetFetch on the coordinator that loaded the partition afterwards: %v, %v: want only %v", offs, err, kept)
	}
}
