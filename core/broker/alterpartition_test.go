package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// These tests pin the leader's AlterPartition through Config.AlterPartition, the seam the
// simulator uses to delay and lose requests and answers: a lost answer keeps the change
// pending and the same request is sent again; a resent request that the controller refuses
// because its state moved on may have been applied by its first attempt, so the change stays
// pending (the HW keeps counting the would-be member) until the controller's state arrives.

// alterLink is a Config.AlterPartition that answers at once, losing what it is told to: a
// lost request never reaches the controller, a lost answer does (the change is applied).
type alterLink struct {
	ctrl                    *controller.Controller
	loseRequest, loseAnswer int
	sent                    []controller.AlterPartitionRequest
}

var errAlterLost = fmt.Errorf("lost: %w", kerr.RequestTimedOut)

func (a *alterLink) send(req controller.AlterPartitionRequest, answer func(controller.PartitionState, error)) {
	a.sent = append(a.sent, req)
	if a.loseRequest > 0 {
		a.loseRequest--
		answer(controller.PartitionState{}, errAlterLost)
		return
	}
	st, err := a.ctrl.AlterPartition(req)
	if a.loseAnswer > 0 {
		a.loseAnswer--
		answer(controller.PartitionState{}, errAlterLost)
		return
	}
	answer(st, err)
}

// manualPair starts two Config.Manual brokers on in-memory disks, with a controller whose
// changes reach them only through deliver, a clock the test moves, and AlterPartition
// through link; it creates topic t (one partition, RF 2, min.insync.replicas 1) and returns
// its leader and follower once both applied their roles.
func manualPair(t *testing.T) (ctrl *controller.Controller, link *alterLink, now *int64, deliver func(), leader, follower *Broker) {
	t.Helper()
	return manualPairWith(t, nil)
}

// manualPairWith is manualPair with the brokers' config changed by set (nil: none).
func manualPairWith(t *testing.T, set func(*Config)) (ctrl *controller.Controller, link *alterLink, now *int64, deliver func(), leader, follower *Broker) {
	t.Helper()
	clock := int64(1_000_000) * int64(time.Second)
	now = &clock
	ctrl = controller.New(controller.Config{ManualDelivery: true, Now: func() int64 { return *now }})
	t.Cleanup(func() { ctrl.Close() })
	link = &alterLink{ctrl: ctrl}
	cfg := testConfig()
	cfg.Manual = true
	cfg.Now = func() int64 { return *now }
	cfg.AlterPartition = link.send
	if set != nil {
		set(&cfg)
	}
	bs := map[int32]*Broker{}
	for id := int32(0); id < 2; id++ {
		c := cfg
		c.ID, c.DataDir, c.FS = id, fmt.Sprintf("/b%d", id), vfs.NewMemFS(nil)
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
	deliver = func() {
		for id := range bs {
			ctrl.DeliverPending(id, 0)
		}
	}
	states, err := ctrl.CreateTopic("t", 1, 2, map[string]string{"min.insync.replicas": "1"})
	if err != nil {
		t.Fatal(err)
	}
	deliver()
	leader = bs[states[0].Leader]
	follower = bs[states[0].Replicas[0]]
	if follower == leader {
		follower = bs[states[0].Replicas[1]]
	}
	return ctrl, link, now, deliver, leader, follower
}

// fetchRound runs one round of f's fetcher (whatever it planned) against leader, in process.
func fetchRound(t *testing.T, f *Broker, leader *Broker) {
	t.Helper()
	var fe *Fetcher
	for _, x := range f.Fetchers() {
		if x.Source() == leader.ID() && len(x.Partitions()) > 0 {
			fe = x
		}
	}
	if fe == nil {
		t.Fatalf("broker %d has no fetcher from %d", f.ID(), leader.ID())
	}
	r := fe.Plan()
	if len(r.Epochs) > 0 {
		fe.ApplyEpochs(r, ServeEpochs(leader, r.Epochs))
	}
	if len(r.Fetch.Partitions) > 0 {
		var rs ReplicaServe
		resp, err := rs.Fetch(context.Background(), leader, &r.Fetch)
		if err != nil {
			t.Fatal(err)
		}
		fe.ApplyFetch(r, copyFetchResponse(resp))
	}
}

func copyFetchResponse(r []FetchPartition) []FetchPartition {
	out := slices.Clone(r)
	for i := range out {
		out[i].RecordBytes = slices.Clone(out[i].RecordBytes)
	}
	return out
}

// TestAlterPartitionLostRequestIsSentAgain: a shrink whose request is lost stays pending and
// is sent again, the same request; its answer applies the change without any metadata
// update.
func TestAlterPartitionLostRequestIsSentAgain(t *testing.T) {
	ctrl, link, now, _, l, f := manualPair(t)
	*now += 20 * int64(time.Second) // past replica.lag.time.max.ms: the follower is out of sync
	link.loseRequest = 2
	l.MaybeShrinkISRs()
	if len(link.sent) != 3 {
		t.Fatalf("%d AlterPartition requests sent, want 3 (two lost, then answered)", len(link.sent))
	}
	for _, req := range link.sent[1:] {
		if !slices.Equal(req.ISR, link.sent[0].ISR) || req.PartitionEpoch != link.sent[0].PartitionEpoch {
			t.Fatalf("resent request %+v differs from the first %+v", req, link.sent[0])
		}
	}
	st, _ := ctrl.Partition("t", 0)
	r, _ := l.Replica("t", 0)
	if want := []int32{l.ID()}; !slices.Equal(st.ISR, want) || !slices.Equal(r.ISR(), want) {
		t.Fatalf("controller ISR %v, leader ISR %v; want %v (follower %d shrunk)", st.ISR, r.ISR(), want, f.ID())
	}
}

// TestAlterPartitionResentAfterLostAnswerStaysPending: an expansion the controller applied
// but whose answer was lost is sent again and refused INVALID_UPDATE_VERSION (the partition
// epoch moved, by that very change). The leader must not withdraw the expansion: the
// controller has the follower in the ISR, so the HW must not pass the follower's LEO. The
// controller's state settles the change when it arrives.
func TestAlterPartitionResentAfterLostAnswerStaysPending(t *testing.T) {
	ctrl, link, now, deliver, l, f := manualPair(t)
	*now += 20 * int64(time.Second)
	l.MaybeShrinkISRs() // ISR [leader]
	if res := produce(t, l, 1, "t", 0, batchAt("a", 3, 1000)); res.Err != nil {
		t.Fatal(res.Err)
	}
	lr, _ := l.Replica("t", 0)
	fr, _ := f.Replica("t", 0)
	for i := 0; i < 10 && lr.FollowerLEO(f.ID()) < 3; i++ {
		fetchRound(t, f, l) // the follower catches up: its expansion is queued
	}
	if fr.LEO() != 3 || lr.HW() != 3 {
		t.Fatalf("follower LEO %d, leader HW %d: want both 3", fr.LEO(), lr.HW())
	}
	link.sent, link.loseAnswer = nil, 1
	l.ApplyExpansions()
	st, _ := ctrl.Partition("t", 0)
	if len(link.sent) != 2 || !slices.Contains(st.ISR, f.ID()) {
		t.Fatalf("%d requests sent, controller ISR %v: want the expansion applied by the first and the second refused", len(link.sent), st.ISR)
	}
	// The leader has not heard of the new ISR yet; it appends while the follower is idle,
	// longer than replica.lag.time.max.ms (so no longer held back as a caught-up follower
	// about to join).
	*now += 20 * int64(time.Second)
	if res := produce(t, l, 1, "t", 0, batchAt("b", 3, 2000)); res.Err != nil {
		t.Fatal(res.Err)
	}
	if lr.HW() > fr.LEO() {
		t.Fatalf("leader HW %d passed the LEO %d of follower %d, which the controller has in the ISR %v: the expansion was withdrawn on an ambiguous refusal",
			lr.HW(), fr.LEO(), f.ID(), st.ISR)
	}
	deliver() // the controller's state settles the change
	if !slices.Contains(lr.ISR(), f.ID()) {
		t.Fatalf("leader ISR %v after the controller's state, want %d in it", lr.ISR(), f.ID())
	}
	fetchRound(t, f, l)
	fetchRound(t, f, l)
	if lr.HW() != 6 {
		t.Fatalf("leader HW %d after the follower caught up, want 6", lr.HW())
	}
}
