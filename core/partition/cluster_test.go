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
// moves bytes between them the way replica fetchers do: a tiny in-test
// controller (leader, epochs, ISR) plus fetch / OffsetForLeaderEpoch round
// trips done synchronously by the test.
type testCluster struct {
	t     testing.TB
	clock *fakeClock
	cfg   Config

	st      controller.PartitionState
	brokers map[int32]*testBroker
	ids     []int32

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
	hwCkp int64 // HW at the last stop (the replication-offset-checkpoint)
	asks  int   // OffsetForLeaderEpoch requests in the last truncation
	fs    FetchState
}

func newTestCluster(t testing.TB, cfg Config, ids []int32, realLog bool) *testCluster {
	c := &testCluster{t: t, clock: &fakeClock{}, cfg: cfg, brokers: map[int32]*testBroker{}, ids: ids, lastHW: map[*Replica]int64{}, realLog: realLog}
	c.cfg.Now = c.clock.Now
	c.st = controller.PartitionState{Topic: "t", Partition: 0, Leader: controller.NoLeader, LeaderEpoch: -1, Replicas: slices.Clone(ids)}
	for _, id := range ids {
		b := &testBroker{id: id, dir: t.TempDir(), alive: true}
		if !realLog {
			b.log = newMemLog()
		}
		c.brokers[id] = b
		c.open(b)
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

// elect installs leader at a new epoch with isr and tells every live broker.
func (c *testCluster) elect(leader int32, isr []int32) error {
	c.st.Leader = leader
	c.st.LeaderEpoch++
	c.st.PartitionEpoch++
	c.st.ISR = slices.Clone(isr)
	lb := c.brokers[leader]
	if err := lb.r.MakeLeader(c.st); err != nil {
		return fmt.Errorf("MakeLeader(%d): %w", leader, err)
	}
	for _, id := range c.ids {
		b := c.brokers[id]
		if id == leader || !b.alive {
			continue
		}
		if err := c.follow(b); err != nil {
			return err
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

// applyISR is the controller accepting an AlterPartition.
func (c *testCluster) applyISR(isr []int32) {
	c.st.ISR = slices.Clone(isr)
	c.st.PartitionEpoch++
	for _, id := range c.ids {
		if b := c.brokers[id]; b.alive {
			b.r.ApplyISR(c.st)
		}
	}
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
	join, err := lb.r.UpdateFollower(f, -1, off, fb.r.LogStart())
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
		c.expand(lb, f)
	}
	return nil
}

// expand is the leader's ISR expansion of f, accepted by the controller at once.
func (c *testCluster) expand(lb *testBroker, f int32) {
	if p := lb.r.PrepareExpand(f); p != nil {
		c.applyISR(p.ISR)
	}
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
	lb, err := c.leader()
	if err != nil {
		return nil
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
