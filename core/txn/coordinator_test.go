package txn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// tcoord is one broker in Manual mode on a MemFS disk, its controller and a Manual
// Coordinator on a virtual clock: __transaction_state has one partition with one replica, so
// every write is acknowledged as soon as it is appended (Poll ends its wait).
type tcoord struct {
	t    *testing.T
	now  int64 // ns
	ctrl *controller.Controller
	fs   *vfs.MemFS
	b    *broker.Broker
	c    *Coordinator
	cfg  Config
	pids int64
	mu   sync.Mutex
	logs []string
}

func newTCoord(t *testing.T, cfg Config) *tcoord {
	t.Helper()
	tc := &tcoord{t: t, now: int64(1_700_000_000) * int64(time.Second)}
	tc.ctrl = controller.New(controller.Config{BrokerSessionTimeoutMs: 1 << 40, Now: func() int64 { return tc.now }, ManualDelivery: true})
	tc.fs = vfs.NewMemFS(func() time.Time { return time.Unix(0, tc.now) })
	cfg.Manual = true
	cfg.NumPartitions, cfg.ReplicationFactor, cfg.MinISR = 1, 1, 1
	cfg.ProducerIDs = func() int64 { tc.pids++; return 100 + tc.pids }
	cfg.Logf = func(f string, a ...any) {
		tc.mu.Lock()
		tc.logs = append(tc.logs, fmt.Sprintf(f, a...))
		tc.mu.Unlock()
	}
	tc.cfg = cfg
	tc.start()
	if _, err := EnsureStateTopic(tc.ctrl, cfg); err != nil {
		t.Fatal(err)
	}
	tc.ctrl.DeliverPending(0, 1<<20)
	tc.c.Scan()
	if _, ok := tc.c.LoadedEpoch(0); !ok {
		t.Fatalf("%s-0 not loaded after the broker became its leader", StateTopic)
	}
	t.Cleanup(func() { tc.c.Close(); tc.b.Kill() })
	return tc
}

func (tc *tcoord) nowMs() int64 { return tc.now / int64(time.Millisecond) }

func (tc *tcoord) start() {
	bc := broker.DefaultConfig()
	bc.ID, bc.DataDir, bc.FS, bc.Manual = 0, "/broker-0", tc.fs, true
	bc.Now = func() int64 { return tc.now }
	bc.Logf = func(string, ...any) {}
	b, err := broker.New(bc, tc.ctrl, noTransport{})
	if err != nil {
		tc.t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		tc.t.Fatal(err)
	}
	tc.b = b
	tc.c = NewCoordinator(tc.cfg, b, tc.ctrl, tc.nowMs)
	tc.c.Start()
}

// restart starts a new incarnation of the broker and its coordinator on the same disk.
func (tc *tcoord) restart() {
	tc.c.Close()
	tc.b.Kill()
	tc.start()
	tc.ctrl.DeliverPending(0, 1<<20)
	tc.c.Scan()
}

type noTransport struct{}

func (noTransport) Dial(context.Context, int32, int) (broker.FetchConn, error) {
	return nil, fmt.Errorf("txn test: no fetchers")
}

// advance moves the clock by ms and runs what is due (Tick, Poll).
func (tc *tcoord) advance(ms int64) {
	tc.now += ms * int64(time.Millisecond)
	tc.c.Tick()
	tc.c.Poll()
}

// init runs InitProducerIdAsync to its answer (Poll ends the writes' waits).
func (tc *tcoord) init(id string) (int64, int16, error) {
	tc.t.Helper()
	var pid int64
	var epoch int16
	var err error
	done := false
	tc.c.InitProducerIDAsync(id, 60000, -1, -1, func(p int64, e int16, er error) { pid, epoch, err, done = p, e, er, true })
	for i := 0; i < 10 && !done; i++ {
		tc.c.Poll()
	}
	if !done {
		tc.t.Fatalf("InitProducerId of %q not answered", id)
	}
	return pid, epoch, err
}

func (tc *tcoord) end(id string, pid int64, epoch int16, commit bool) error {
	tc.t.Helper()
	var err error
	done := false
	tc.c.EndTxnAsync(id, pid, epoch, commit, func(er error) { err, done = er, true })
	for i := 0; i < 10 && !done; i++ {
		tc.c.Poll()
	}
	if !done {
		tc.t.Fatalf("EndTxn of %q not answered", id)
	}
	return err
}

func (tc *tcoord) add(id string, pid int64, epoch int16) error {
	tc.t.Helper()
	var err error
	done := false
	tc.c.AddPartitionsAsync(id, pid, epoch, []TP{{StateTopic, 0}}, func(bad map[TP]error, er error) {
		err, done = er, true
		for _, e := range bad {
			err = e
		}
	})
	for i := 0; i < 10 && !done; i++ {
		tc.c.Poll()
	}
	if !done {
		tc.t.Fatalf("AddPartitionsToTxn of %q not answered", id)
	}
	return err
}

// TestIDExpiration: transactional.id.expiration.ms on a virtual clock. An id idle (no
// transaction open) past it is expired at the next check: a tombstone is written, Describe
// no longer finds it, a new coordinator loading the partition does not bring it back, and its
// next InitProducerId gets a new producer id at epoch 0. An id with a transaction open is not
// expired however old, nor one updated within the expiration.
func TestIDExpiration(t *testing.T) {
	const expiration, interval = 60_000, 10_000
	tc := newTCoord(t, Config{IDExpirationMs: expiration, RemoveExpiredIntervalMs: interval, AbortCheckIntervalMs: 1 << 40, MaxTimeoutMs: 1 << 30})
	idlePID, _, err := tc.init("idle")
	if err != nil {
		t.Fatal(err)
	}
	openPID, openEpoch, err := tc.init("open")
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.add("open", openPID, openEpoch); err != nil {
		t.Fatal(err)
	}
	donePID, doneEpoch, err := tc.init("done")
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.add("done", donePID, doneEpoch); err != nil {
		t.Fatal(err)
	}

	// Half the expiration: nothing expires.
	tc.advance(expiration / 2)
	if err := tc.end("done", donePID, doneEpoch, true); err != nil { // "done" updated now
		t.Fatal(err)
	}
	for range expiration/interval/2 - 1 { // (to 10 s short of the expiration)
		tc.advance(interval)
	}
	for _, id := range []string{"idle", "open", "done"} {
		if _, err := tc.c.Describe(id); err != nil {
			t.Fatalf("%s expired after %d ms idle: %v", id, expiration-interval, err)
		}
	}
	// Past the expiration of "idle" (not of "done", committed later; never of "open").
	tc.advance(interval)
	tc.advance(interval)
	if _, err := tc.c.Describe("idle"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("idle id past transactional.id.expiration.ms: Describe answered %v, want TRANSACTIONAL_ID_NOT_FOUND", err)
	}
	if _, err := tc.c.Describe("done"); err != nil {
		t.Fatalf("id committed %d ms ago expired: %v", expiration/2+interval*2, err)
	}
	if m, err := tc.c.Describe("open"); err != nil || m.State != Ongoing {
		t.Fatalf("id with an open transaction: %+v, %v; want it kept, Ongoing", m, err)
	}
	found := false
	tc.mu.Lock()
	for _, l := range tc.logs {
		found = found || strings.Contains(l, `"idle"`) && strings.Contains(l, "expired")
	}
	tc.mu.Unlock()
	if !found {
		t.Errorf("no log line names the expired id: %q", tc.logs)
	}

	// A new coordinator loads the tombstone: the id stays gone.
	tc.restart()
	if _, ok := tc.c.LoadedEpoch(0); !ok {
		t.Fatalf("%s-0 not loaded after the restart", StateTopic)
	}
	if _, err := tc.c.Describe("idle"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("expired id after a reload: Describe answered %v, want TRANSACTIONAL_ID_NOT_FOUND", err)
	}
	if m, err := tc.c.Describe("open"); err != nil || m.ProducerID != openPID {
		t.Fatalf("open id after a reload: %+v, %v", m, err)
	}
	pid, epoch, err := tc.init("idle")
	if err != nil || pid == idlePID || epoch != 0 {
		t.Fatalf("InitProducerId of an expired id: producer id %d epoch %d, %v; want a new producer id (not %d) at epoch 0", pid, epoch, err, idlePID)
	}

	// "done" expires once it has been idle long enough too.
	for range expiration / interval {
		tc.advance(interval)
	}
	if _, err := tc.c.Describe("done"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("committed id idle past the expiration: Describe answered %v", err)
	}
	if _, err := tc.c.Describe("open"); err != nil {
		t.Fatalf("id with an open transaction expired: %v", err)
	}
}

// TestIDExpiredRule: the decision rule alone.
func TestIDExpiredRule(t *testing.T) {
	const exp = 1000
	for _, tt := range []struct {
		st     State
		update int64
		want   bool
	}{
		{Empty, 0, true}, {CompleteCommit, 0, true}, {CompleteAbort, 0, true},
		{Empty, 1, false}, // updated exp-1 ms ago
		{Ongoing, 0, false}, {PrepareCommit, 0, false}, {PrepareAbort, 0, false}, {PrepareEpochFence, 0, false}, {Dead, 0, false},
	} {
		if got := IDExpired(Meta{State: tt.st, UpdateMs: tt.update}, exp, exp); got != tt.want {
			t.Errorf("%s updated at %d, now %d, expiration %d: expired %v, want %v", tt.st, tt.update, exp, exp, got, tt.want)
		}
	}
}

// TestVerifyPartitions: KIP-890's verify-only AddPartitionsToTxn on a coordinator: a partition
// the open transaction holds verifies, another answers INVALID_TXN_STATE, and once the
// transaction ended even the partition it held does (a late batch must not open a new
// transaction there); an old epoch is PRODUCER_FENCED.
func TestVerifyPartitions(t *testing.T) {
	tc := newTCoord(t, Config{AbortCheckIntervalMs: 1 << 40, MaxTimeoutMs: 1 << 30})
	pid, epoch, err := tc.init("v")
	if err != nil {
		t.Fatal(err)
	}
	held, other := TP{StateTopic, 0}, TP{StateTopic, 1}
	if err := tc.add("v", pid, epoch); err != nil {
		t.Fatal(err)
	}
	got, err := tc.c.VerifyPartitions("v", pid, epoch, []TP{held, other})
	if err != nil || got[held] != nil || !errors.Is(got[other], kerr.InvalidTxnState) {
		t.Fatalf("verify in an open transaction: %v, %v; want %v held, %v INVALID_TXN_STATE", got, err, held, other)
	}
	if _, err := tc.c.VerifyPartitions("v", pid, epoch-1, []TP{held}); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("verify with an old epoch: %v, want PRODUCER_FENCED", err)
	}
	if err := tc.end("v", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	got, err = tc.c.VerifyPartitions("v", pid, epoch, []TP{held})
	if err != nil || !errors.Is(got[held], kerr.InvalidTxnState) {
		t.Fatalf("verify after the transaction ended: %v, %v; want INVALID_TXN_STATE", got, err)
	}
}

// TestBlockedRequestEndsNotCoordinator: a request whose context ends before its answer (the
// broker's server stopping under it) is answered NOT_COORDINATOR, which the client retries
// at the coordinator it finds again, never UNKNOWN_SERVER_ERROR, which fails a
// transactional producer for good.
func TestBlockedRequestEndsNotCoordinator(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := block(ctx, func(done func(error)) {})
	if !errors.Is(err, kerr.NotCoordinator) || !errors.Is(err, context.Canceled) {
		t.Fatalf("block with an ended context: %v, want NOT_COORDINATOR (context canceled)", err)
	}
	v, err := block(context.Background(), func(done func(int)) { done(7) })
	if err != nil || v != 7 {
		t.Fatalf("block answered: %v %v, want 7", v, err)
	}
}
