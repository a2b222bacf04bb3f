package partition

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// fakeClock is the injected clock of the scripted tests.
type fakeClock struct{ ns int64 }

func (c *fakeClock) Now() int64 { return c.ns }

// testCluster wires several Replicas of one partition (one per broker) and
// moves bytes between them the way replica fetchers do: the real controller
// (core/controller: registrations and broker epochs, elections, AlterPartition)
// decides leaders, epochs and ISRs, and the test does fetch /
// OffsetForLeaderEpoch round trips synchronously and delivers every controller
// change to the live replicas at once.
type testCluster struct {
	t     testing.TB
	clock *fakeClock
	cfg   Config

	ctrl    *controller.Controller
	st      controller.PartitionState // the controller's state, as of the last sync
	brokers map[int32]*testBroker
	ids     []int32
	// dead lists, in the order they stopped, the brokers that were killed or crashed but
	// whose sessions have not expired at the controller yet (it still counts them alive):
	// they are fenced before the next election or restart.
	dead []int32

	seq       int      // record values "r<seq>"
	committed []string // value of every offset ever below a leader's HW
	lastHW    map[*Replica]int64

	deferTruncation bool // elect: followers do not truncate yet
	realLog         bool // brokers use core/log.Log in temp dirs
}

// testStore is a replica log as the test cluster sees it: the in-memory
// fake or a real *log.Log in a temp dir.
type testStore interface {
	logStore
	Bytes(from, to int64) ([]byte, error)
}

type testBroker struct {
	id    int32
	dir   string
	log   testStore
	r     *Replica
	alive bool
	epoch int64 // broker epoch of its current registration (incarnation)
	// applied is the controller state this incarnation's replica was last given (Leader
	// notApplied: none yet).
	applied controller.PartitionState
	hwCkp   int64 // HW at the last stop (the replication-offset-checkpoint)
	asks    int   // OffsetForLeaderEpoch requests in the last truncation
	fs      FetchState
}

// notApplied marks a replica that has not been given a controller state yet.
const notApplied int32 = -2

func newTestCluster(t testing.TB, cfg Config, ids []int32, realLog bool) *testCluster {
	c := &testCluster{t: t, clock: &fakeClock{}, cfg: cfg, brokers: map[int32]*testBroker{}, ids: ids, lastHW: map[*Replica]int64{}, realLog: realLog}
	c.cfg.Now = c.clock.Now
	c.ctrl = controller.New(controller.Config{Now: c.clock.Now, Logf: t.Logf})
	t.Cleanup(c.ctrl.Close)
	c.cfg.BrokerEpoch = c.ctrl.BrokerEpoch // leaders refuse fetches of old incarnations (KIP-903)
	c.st = controller.PartitionState{Topic: "t", Partition: 0, Leader: controller.NoLeader, LeaderEpoch: -1, Replicas: slices.Clone(ids)}
	for _, id := range ids {
		b := &testBroker{id: id, dir: t.TempDir(), alive: true}
		if !realLog {
			b.log = newMemLog()
		}
		c.brokers[id] = b
		c.open(b)
		epoch, err := c.ctrl.RegisterBroker(controller.Registration{ID: id, Host: "127.0.0.1", Port: 9092 + id})
		if err != nil {
			t.Fatal(err)
		}
		b.epoch = epoch
	}
	t.Cleanup(func() {
		for _, b := range c.brokers {
			if b.alive {
				b.r.Close()
			}
		}
	})
	return c
}

// open (re)opens b's log and replica: a broker start or restart.
func (c *testCluster) open(b *testBroker) {
	if c.realLog {
		l, _, err := log.Open(b.dir, log.DefaultConfig())
		if err != nil {
			c.t.Fatalf("broker %d: log.Open: %v", b.id, err)
		}
		b.log = l
	} else if b.log != nil {
		b.log = b.log.(*memLog).reopen()
	}
	r, err := newReplica("t", 0, b.id, b.log, b.dir, c.cfg)
	if err != nil {
		c.t.Fatalf("broker %d: newReplica: %v", b.id, err)
	}
	b.r = r
	b.applied = controller.PartitionState{Leader: notApplied}
}

func (c *testCluster) broker(id int32) (*testBroker, error) {
	b, ok := c.brokers[id]
	if !ok {
		return nil, fmt.Errorf("no broker %d", id)
	}
	return b, nil
}

func (c *testCluster) leader() (*testBroker, error) {
	b, ok := c.brokers[c.st.Leader]
	if !ok || !b.alive {
		return nil, fmt.Errorf("no live leader (leader %d)", c.st.Leader)
	}
	return b, nil
}

// create creates the partition at the controller: its first leader (leader epoch 0) is the
// preferred replica, which must be leader; an ISR other than the replica set is that
// leader's AlterPartition (a shrink).
func (c *testCluster) create(leader int32, isr []int32) error {
	sts, err := c.ctrl.CreateTopic("t", 1, int16(len(c.ids)), nil)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if st := sts[0]; !slices.Equal(st.Replicas, c.ids) || st.Leader != leader {
		return fmt.Errorf("the controller placed %v: replicas %v with the preferred replica first as leader", st, c.ids)
	}
	if !slices.Equal(isr, c.ids) {
		epochs := make([]int64, len(isr))
		for i, id := range isr {
			epochs[i] = c.brokers[id].epoch
		}
		if _, err := c.ctrl.AlterPartition(controller.AlterPartitionRequest{Topic: "t", Partition: 0, Leader: leader,
			LeaderBrokerEpoch: c.brokers[leader].epoch, LeaderEpoch: 0, PartitionEpoch: 0, ISR: isr, BrokerEpochs: epochs}); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	return c.sync()
}

// fenceDead lets the sessions of the stopped brokers expire at the controller, in the order
// they stopped (controller.CheckSessions fences the stalest first): it elects a new leader
// if the leader is among them, and takes them out of the ISR.
func (c *testCluster) fenceDead() {
	for _, id := range c.dead {
		c.ctrl.BrokerDown(id)
	}
	c.dead = c.dead[:0]
}

// elect makes leader the leader through the controller. A clean election is a forced move
// (controller.TransferLeader: the controller checks that leader is an alive, undamaged ISR
// member) made before the controller notices the dead brokers; then their sessions expire.
// An unclean one enables unclean.leader.election.enable for the topic for the time of the
// election and lets the dead brokers' sessions expire: the controller elects by its rule,
// which must pick leader. The new state reaches every live replica (deferTruncation: the
// followers do not truncate yet).
func (c *testCluster) elect(leader int32, unclean, deferTruncation bool) error {
	cur, _ := c.ctrl.Partition("t", 0)
	if unclean {
		if err := c.ctrl.AlterTopicConfig("t", map[string]string{controller.ConfigUncleanLeaderElectionEnable: "true"}, nil); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		defer func() {
			if err := c.ctrl.AlterTopicConfig("t", nil, []string{controller.ConfigUncleanLeaderElectionEnable}); err != nil {
				c.t.Errorf("controller: %v", err)
			}
		}()
	}
	if cur.Leader != leader && (!unclean || slices.Contains(cur.ISR, leader)) {
		if _, err := c.ctrl.TransferLeader("t", 0, leader); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	c.fenceDead()
	c.deferTruncation = deferTruncation
	defer func() { c.deferTruncation = false }()
	if err := c.sync(); err != nil {
		return err
	}
	if c.st.Leader != leader {
		return fmt.Errorf("the controller elected %d (%v), want %d", c.st.Leader, c.st, leader)
	}
	return nil
}

// sync reads the controller's state and hands it to every live replica, the leader first,
// as the brokers' subscriptions do: MakeLeader or MakeFollower (then truncation) for a new
// leadership, ApplyISR for an ISR change.
func (c *testCluster) sync() error {
	st, ok := c.ctrl.Partition("t", 0)
	if !ok {
		return fmt.Errorf("controller: partition t-0 is unknown")
	}
	c.st = st
	order := slices.Clone(c.ids)
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case a == st.Leader:
			return -1
		case b == st.Leader:
			return 1
		}
		return 0
	})
	for _, id := range order {
		b := c.brokers[id]
		if !b.alive {
			continue
		}
		newTerm := b.applied.Leader != st.Leader || b.applied.LeaderEpoch != st.LeaderEpoch
		b.applied = st.Clone()
		switch {
		case newTerm && id == st.Leader:
			if err := b.r.MakeLeader(st); err != nil {
				return fmt.Errorf("MakeLeader(%d): %w", id, err)
			}
		case newTerm:
			if err := c.follow(b); err != nil {
				return err
			}
		default:
			b.r.ApplyISR(st)
		}
	}
	return nil
}

// follow makes b a follower of the current leader and runs its truncation.
func (c *testCluster) follow(b *testBroker) error {
	if err := b.r.MakeFollower(c.st); err != nil {
		return fmt.Errorf("MakeFollower(%d): %w", b.id, err)
	}
	if c.deferTruncation {
		return nil
	}
	return c.truncate(b)
}

// stop kills b's process (its replica closes); the controller learns of it when its session
// expires (fenceDead).
func (c *testCluster) stop(b *testBroker) error {
	b.hwCkp = b.r.HW()
	b.alive = false
	c.dead = append(c.dead, b.id)
	return b.r.Close()
}

// restart starts a new incarnation of b, within its session timeout: the registration
// fences the previous incarnation (the sessions of the other dead brokers have expired by
// then). It recovers its replica (HW from its checkpoint), registers (a new broker epoch;
// damaged if its log ends below that HW) and gets the controller's state.
func (c *testCluster) restart(b *testBroker) error {
	c.dead = slices.DeleteFunc(c.dead, func(id int32) bool { return id == b.id })
	c.fenceDead()
	c.open(b)
	b.alive = true
	if err := b.r.RestoreHW(b.hwCkp); err != nil {
		return err
	}
	reg := controller.Registration{ID: b.id, Host: "127.0.0.1", Port: 9092 + b.id}
	if b.r.LEO() < b.hwCkp {
		reg.Damaged = []controller.TopicPartition{{Topic: "t", Partition: 0}}
	}
	epoch, err := c.ctrl.RegisterBroker(reg)
	if err != nil {
		return err
	}
	b.epoch = epoch
	return c.sync()
}

// truncate runs b's truncation against the current leader (KIP-101/279
// OffsetForLeaderEpoch rounds, or to its HW in "hw" mode).
func (c *testCluster) truncate(b *testBroker) error {
	lb, err := c.leader()
	if err != nil {
		return nil // nobody to truncate against yet
	}
	b.asks = 0
	b.fs = NewFetchState(c.st.LeaderEpoch, c.cfg.TruncateMode == TruncateModeHW)
	for b.fs.Phase == PhaseTruncating {
		epoch, ask, act := b.fs.TruncationStep(b.r)
		if ask {
			b.asks++
			e, end := lb.r.EndOffsetForEpoch(epoch)
			act = b.fs.OnEpochAnswer(b.r, epoch, e, end, nil, c.clock.ns, 0)
		}
		if err := c.act(b, act); err != nil {
			return err
		}
		if b.asks > 1<<12 {
			return fmt.Errorf("broker %d: truncation did not converge", b.id)
		}
	}
	return nil
}

// act carries out a FetchState action on b's replica, as the broker's fetcher does.
func (c *testCluster) act(b *testBroker, a FetchAction) error {
	switch a.Kind {
	case ActTruncate:
		return b.r.TruncateTo(a.Offset)
	case ActTruncateFully:
		return b.r.TruncateFullyAndStartAt(a.Offset)
	}
	return nil
}

// alterISR sends the leader's ISR proposal to the controller (AlterPartition, as the
// broker does) and delivers the accepted state; a refusal withdraws it and is an error.
func (c *testCluster) alterISR(lb *testBroker, p *ISRProposal) error {
	_, err := c.ctrl.AlterPartition(controller.AlterPartitionRequest{Topic: "t", Partition: 0, Leader: lb.id,
		LeaderBrokerEpoch: lb.epoch, LeaderEpoch: p.Base.LeaderEpoch, PartitionEpoch: p.Base.PartitionEpoch,
		ISR: p.ISR, BrokerEpochs: p.BrokerEpochs})
	if err != nil {
		lb.r.AbortISRChange(p)
		return fmt.Errorf("controller: %w", err)
	}
	return c.sync()
}

// fetch is one replica fetch round trip of follower f: the leader records
// f's fetch offset (its LEO), returns up to maxBatches batches from there
// and its HW; f appends them and takes min(leader HW, LEO) as its HW.
func (c *testCluster) fetch(f int32, maxBatches int) error {
	fb, err := c.broker(f)
	if err != nil {
		return err
	}
	if !fb.alive {
		return fmt.Errorf("broker %d is down", f)
	}
	lb, err := c.leader()
	if err != nil {
		return err
	}
	off := fb.r.LEO()
	if off > lb.r.LEO() || off < lb.r.LogStart() {
		// OFFSET_OUT_OF_RANGE: the follower asks the leader for its log start and end
		// and truncates (FetchState, Kafka's fetchOffsetAndTruncate).
		fb.fs.OnFetchError(kerr.OffsetOutOfRange, c.clock.ns, 0)
		if err := c.act(fb, fb.fs.OnLeaderOffsets(fb.r, lb.r.LogStart(), lb.r.LEO(), nil, c.clock.ns, 0)); err != nil {
			return err
		}
		off = fb.r.LEO()
	}
	join, err := lb.r.UpdateFollower(f, fb.epoch, off, fb.r.LogStart())
	if err != nil {
		return fmt.Errorf("UpdateFollower(%d, %d): %w", f, off, err)
	}
	blob, err := c.fetchBytes(lb, off, maxBatches)
	if err != nil {
		return err
	}
	if _, err := fb.r.AppendAsFollower(blob, lb.r.HW()); err != nil {
		return fmt.Errorf("AppendAsFollower(%d): %w", f, err)
	}
	if join {
		return c.expand(lb, f)
	}
	return nil
}

// expand is the leader's ISR expansion of f, sent to the controller at once.
func (c *testCluster) expand(lb *testBroker, f int32) error {
	if p := lb.r.PrepareExpand(f); p != nil {
		return c.alterISR(lb, p)
	}
	return nil
}

// fetchBytes returns what a replica fetch at off returns: whole batches up
// to the leader's LEO, at most maxBatches of them (0 = all). With the real
// log it reads through Replica.Read (the sendfile slice) and checks it
// against log.Bytes.
func (c *testCluster) fetchBytes(lb *testBroker, off int64, maxBatches int) ([]byte, error) {
	leo := lb.r.LEO()
	all, err := lb.log.Bytes(off, leo)
	if err != nil {
		return nil, err
	}
	end := leo
	if maxBatches > 0 {
		n, pos := 0, 0
		err := records.Split(all, func(b []byte, h records.Header) error {
			if n < maxBatches {
				n, pos, end = n+1, pos+len(b), h.NextOffset()
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		all = all[:pos]
		if n == 0 {
			end = off
		}
	}
	if !c.realLog {
		return all, nil
	}
	sl, err := lb.r.Read(off, end, 1<<30, true)
	if err != nil {
		return nil, fmt.Errorf("leader Read(%d, %d): %w", off, end, err)
	}
	defer sl.Release()
	got, err := sl.ReadAll(nil)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(got, all) {
		return nil, fmt.Errorf("Replica.Read(%d, %d) returned %d bytes that differ from log.Bytes (%d bytes)", off, end, len(got), len(all))
	}
	return got, nil
}

// crashKeep simulates a power loss that kept only [0, keep) of b's log on
// disk (b is stopped).
func (c *testCluster) crashKeep(b *testBroker, keep int64) error {
	if c.realLog {
		l, _, err := log.Open(b.dir, log.DefaultConfig())
		if err != nil {
			return err
		}
		if err := l.TruncateTo(keep); err != nil {
			return err
		}
		if err := l.Close(); err != nil {
			return err
		}
	} else {
		ml := b.log.(*memLog).reopen()
		if err := ml.TruncateTo(keep); err != nil {
			return err
		}
		if err := ml.Close(); err != nil {
			return err
		}
		b.log = ml
	}
	b.hwCkp = min(b.hwCkp, keep)
	return nil
}

// makeBatches builds n records in batches of per records each.
func (c *testCluster) makeBatches(n, per int) []byte {
	var blob []byte
	for n > 0 {
		k := min(n, per)
		recs := make([]records.Record, k)
		for i := range recs {
			recs[i] = records.Record{Value: fmt.Appendf(nil, "r%d", c.seq)}
			c.seq++
		}
		blob = records.AppendBatch(blob, 0, 0, c.clock.ns/1e6, recs)
		n -= k
	}
	return blob
}

// values returns the record values of b's log by offset.
func values(b *testBroker) []string {
	data, _ := b.log.Bytes(b.log.LogStart(), b.log.LEO())
	var out []string
	_ = records.Split(data, func(batch []byte, h records.Header) error {
		return records.ForEachRecord(batch, func(off, _ int64, _, v []byte) error {
			for int64(len(out)) < off {
				out = append(out, "")
			}
			out = append(out, string(v))
			return nil
		})
	})
	return out
}

// check verifies the invariants after every step and records what is
// committed (below the leader's HW).
func (c *testCluster) check() error {
	for _, id := range c.ids {
		b := c.brokers[id]
		if !b.alive {
			continue
		}
		hw, leo := b.r.HW(), b.r.LEO()
		if hw > leo {
			return fmt.Errorf("invariant: broker %d HW %d > LEO %d", id, hw, leo)
		}
		if b.r.IsLeader() {
			if last, ok := c.lastHW[b.r]; ok && hw < last {
				return fmt.Errorf("invariant: leader %d HW decreased %d -> %d", id, last, hw)
			}
			c.lastHW[b.r] = hw
		}
	}
	if cur, ok := c.ctrl.Partition("t", 0); ok && cur.String() != c.st.String() {
		return fmt.Errorf("BUG: the controller's state %v was not delivered (replicas have %v)", cur, c.st)
	}
	lb, err := c.leader()
	if err != nil {
		return nil
	}
	if !lb.r.IsLeader() || lb.r.LeaderEpoch() != c.st.LeaderEpoch {
		return fmt.Errorf("invariant: broker %d (IsLeader %v, epoch %d) does not lead epoch %d as the controller says", lb.id, lb.r.IsLeader(), lb.r.LeaderEpoch(), c.st.LeaderEpoch)
	}
	// Every live ISR member holds the leader's [logStart, HW) byte for
	// byte. (Not in the "hw" truncation ablation: breaking this is exactly
	// what KIP-101 scenario 1 demonstrates.)
	if c.cfg.TruncateMode != TruncateModeHW {
		hw := lb.r.HW()
		want, err := lb.log.Bytes(lb.log.LogStart(), hw)
		if err != nil {
			return fmt.Errorf("leader bytes [.., %d): %w", hw, err)
		}
		for _, id := range lb.r.ISR() {
			m := c.brokers[id]
			if id == lb.id || !m.alive || !m.r.IsLeader() && m.r.LeaderEpoch() != lb.r.LeaderEpoch() {
				continue
			}
			if m.r.LEO() < hw {
				return fmt.Errorf("invariant: ISR member %d LEO %d < leader HW %d", id, m.r.LEO(), hw)
			}
			got, err := m.log.Bytes(lb.log.LogStart(), hw)
			if err != nil || !bytes.Equal(got, want) {
				return fmt.Errorf("invariant: ISR member %d does not hold the leader's [.., HW %d) (err %v)", id, hw, err)
			}
		}
	}
	if hw := lb.r.HW(); int64(len(c.committed)) < hw {
		vals := values(lb)
		for int64(len(c.committed)) < hw {
			c.committed = append(c.committed, vals[len(c.committed)])
		}
	}
	return nil
}

// lost counts committed offsets the current leader does not hold with the
// same record.
func (c *testCluster) lost() (int, error) {
	lb, err := c.leader()
	if err != nil {
		return 0, err
	}
	vals := values(lb)
	n := 0
	for i, v := range c.committed {
		if i >= len(vals) || vals[i] != v {
			n++
		}
	}
	return n, nil
}

func (c *testCluster) identical(ids []int32) (bool, error) {
	var first []byte
	for i, id := range ids {
		b, err := c.broker(id)
		if err != nil {
			return false, err
		}
		data, err := b.log.Bytes(b.log.LogStart(), b.log.LEO())
		if err != nil {
			return false, err
		}
		if i == 0 {
			first = data
		} else if !bytes.Equal(first, data) {
			return false, nil
		}
	}
	return true, nil
}

func errCode(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if err == nil {
		return "NONE"
	}
	return "UNKNOWN"
}

func dur(s string) (int64, error) {
	d, err := time.ParseDuration(s)
	return int64(d), err
}
