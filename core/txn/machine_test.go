package txn

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func pids() func() int64 {
	n := int64(100)
	return func() int64 { n++; return n }
}

func mustInit(t *testing.T) func(InitDecision, error) InitDecision {
	return func(d InitDecision, err error) InitDecision {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func wantErr(t *testing.T, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err %v, want %v", err, want)
	}
}

// TestRulesLifecycle walks one transactional id through Kafka's states: init, add, commit,
// complete, re-init (epoch bump), fencing of the old epoch, abort, retries.
func TestRulesLifecycle(t *testing.T) {
	newPID := pids()
	d := mustInit(t)(Init(Meta{}, false, "a", 60000, -1, -1, 10, newPID))
	m := d.Next
	if m.ProducerID != 101 || m.ProducerEpoch != 0 || m.State != Empty || m.StartMs != -1 {
		t.Fatalf("new id: %+v", m)
	}
	_, _, err := End(m, true, "a", 101, 0, true, 11)
	wantErr(t, err, kerr.InvalidTxnState)
	m, write, err := AddPartitions(m, true, "a", 101, 0, []TP{{"t", 1}, {"t", 0}}, 20)
	if err != nil || !write || m.State != Ongoing || m.StartMs != 20 || !slices.Equal(m.Partitions, []TP{{"t", 0}, {"t", 1}}) {
		t.Fatalf("add: %+v %v %v", m, write, err)
	}
	if _, write, err := AddPartitions(m, true, "a", 101, 0, []TP{{"t", 0}}, 21); err != nil || write {
		t.Fatalf("re-add: write %v err %v, want no write", write, err)
	}
	m2, _, _ := AddPartitions(m, true, "a", 101, 0, []TP{{"u", 0}}, 22)
	if m2.StartMs != 20 || len(m2.Partitions) != 3 {
		t.Fatalf("add another: %+v", m2)
	}
	_, _, err = AddPartitions(m, true, "a", 101, 1, nil, 22)
	wantErr(t, err, kerr.ProducerFenced)
	_, _, err = AddPartitions(m, true, "a", 7, 0, nil, 22)
	wantErr(t, err, kerr.InvalidProducerIDMapping)
	if !Expired(m, 20+60001) || Expired(m, 20+60000) {
		t.Fatal("expiry at start + transaction.timeout.ms")
	}
	p, write, err := End(m2, true, "a", 101, 0, true, 30)
	if err != nil || !write || p.State != PrepareCommit {
		t.Fatalf("end: %+v %v", p, err)
	}
	_, _, err = AddPartitions(p, true, "a", 101, 0, []TP{{"t", 5}}, 31)
	wantErr(t, err, kerr.ConcurrentTransactions)
	_, _, err = End(p, true, "a", 101, 0, true, 31)
	wantErr(t, err, kerr.ConcurrentTransactions)
	_, err = Init(p, true, "a", 60000, -1, -1, 31, newPID)
	wantErr(t, err, kerr.ConcurrentTransactions)
	done := Complete(p, 32)
	if done.State != CompleteCommit || done.Partitions != nil {
		t.Fatalf("complete: %+v", done)
	}
	if _, write, err := End(done, true, "a", 101, 0, true, 33); err != nil || write {
		t.Fatalf("retried commit: %v %v", write, err)
	}
	_, _, err = End(done, true, "a", 101, 0, false, 33)
	wantErr(t, err, kerr.InvalidTxnState)
	// A new producer of the id: epoch 1; the old one is fenced.
	d = mustInit(t)(Init(done, true, "a", 1000, -1, -1, 40, newPID))
	if d.Next.ProducerID != 101 || d.Next.ProducerEpoch != 1 || d.AbortFirst {
		t.Fatalf("re-init: %+v", d)
	}
	_, _, err = End(d.Next, true, "a", 101, 0, true, 41)
	wantErr(t, err, kerr.ProducerFenced)
	_, err = Init(d.Next, true, "a", 1000, 101, 0, 41, newPID) // KIP-360 with a stale epoch
	wantErr(t, err, kerr.ProducerFenced)
	// Re-init with an open transaction: abort first with a bumped epoch.
	o, _, _ := AddPartitions(d.Next, true, "a", 101, 1, []TP{{"t", 0}}, 50)
	d = mustInit(t)(Init(o, true, "a", 1000, -1, -1, 51, newPID))
	if !d.AbortFirst {
		t.Fatalf("re-init of an open transaction: %+v", d)
	}
	f := Fence(o, 51)
	if f.State != PrepareAbort || f.ProducerEpoch != 2 {
		t.Fatalf("fence: %+v", f)
	}
	d = mustInit(t)(Init(Complete(f, 52), true, "a", 1000, -1, -1, 53, newPID))
	if d.Next.ProducerEpoch != 3 || d.Next.State != Empty {
		t.Fatalf("init after the abort: %+v", d.Next)
	}
	// Epoch exhaustion: a new producer id.
	x := d.Next
	x.ProducerEpoch = math.MaxInt16 - 1
	d = mustInit(t)(Init(x, true, "a", 1000, -1, -1, 60, newPID))
	if d.Next.ProducerID == 101 || d.Next.ProducerEpoch != 0 {
		t.Fatalf("epoch overflow: %+v", d.Next)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{TransactionalID: "a", ProducerID: 5, ProducerEpoch: 2, TimeoutMs: 60000, State: Empty, UpdateMs: 9, StartMs: -1},
		{TransactionalID: "b", ProducerID: 1 << 40, ProducerEpoch: 7, TimeoutMs: 1, State: Ongoing, UpdateMs: 9, StartMs: 3,
			Partitions: []TP{{"t", 0}, {"t", 3}, {"u", 1}}},
		{TransactionalID: "c", ProducerID: 1, State: PrepareCommit, Partitions: []TP{{"__consumer_offsets", 4}}},
	} {
		id, err := DecodeKey(Key(m.TransactionalID))
		if err != nil || id != m.TransactionalID {
			t.Fatalf("key %q: %q %v", m.TransactionalID, id, err)
		}
		got, err := DecodeValue(id, Value(m))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Partitions, m.Partitions) {
			t.Fatalf("partitions %v, want %v", got.Partitions, m.Partitions)
		}
		got.Partitions, m.Partitions = nil, nil
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("decoded %+v, want %+v", got, m)
		}
	}
	for _, bad := range [][]byte{nil, {0, 1}, {0, 0, 0, 5, 'a'}} {
		if _, err := DecodeKey(bad); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("key %v: %v", bad, err)
		}
	}
	v := Value(Meta{TransactionalID: "x", State: Ongoing, Partitions: []TP{{"t", 0}}})
	for _, bad := range [][]byte{nil, v[:len(v)-1], append([]byte{0, 9}, v[2:]...)} {
		if _, err := DecodeValue("x", bad); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("value %v: %v", bad, err)
		}
	}
	bs := append([]byte(nil), v...)
	bs[16] = 42 // status
	if _, err := DecodeValue("x", bs); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("unknown status: %v", err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(Value(Meta{TransactionalID: "b", ProducerID: 3, State: Ongoing, Partitions: []TP{{"t", 0}, {"u", 1}}}))
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeValue("f", b)
		if err == nil && (m.State < Empty || m.State > PrepareEpochFence) {
			t.Fatalf("accepted state %d", m.State)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(Key("abc"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = DecodeKey(b) })
}

// TestVerify: KIP-890's verify-only AddPartitionsToTxn decision.
func TestVerify(t *testing.T) {
	a, b := TP{"t", 0}, TP{"t", 1}
	ongoing := Meta{TransactionalID: "x", ProducerID: 7, ProducerEpoch: 3, State: Ongoing, Partitions: []TP{a}}
	for _, tt := range []struct {
		name   string
		cur    Meta
		exists bool
		pid    int64
		epoch  int16
		want   map[TP]error // per partition (nil entry: held)
		err    error
	}{
		{"held and not held", ongoing, true, 7, 3, map[TP]error{a: nil, b: kerr.InvalidTxnState}, nil},
		{"unknown id", Meta{}, false, 7, 3, nil, kerr.InvalidProducerIDMapping},
		{"other producer id", ongoing, true, 8, 3, nil, kerr.InvalidProducerIDMapping},
		{"old epoch", ongoing, true, 7, 2, nil, kerr.ProducerFenced},
		{"completing", func() Meta { m := ongoing; m.State = PrepareCommit; return m }(), true, 7, 3, nil, kerr.ConcurrentTransactions},
		{"ended: a late batch", func() Meta { m := ongoing; m.State, m.Partitions = CompleteAbort, nil; return m }(), true, 7, 3, map[TP]error{a: kerr.InvalidTxnState, b: kerr.InvalidTxnState}, nil},
	} {
		got, err := Verify(tt.cur, tt.exists, "x", tt.pid, tt.epoch, []TP{a, b})
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		for tp, want := range tt.want {
			if g := got[tp]; !errors.Is(g, want) || (g == nil) != (want == nil) {
				t.Errorf("%s: %v answered %v, want %v", tt.name, tp, g, want)
			}
		}
	}
}

// TestPartitionForMatchesKafka: Utils.abs(transactionalId.hashCode) % 50, the values Java's
// String.hashCode gives.
func TestPartitionForMatchesKafka(t *testing.T) {
	for id, want := range map[string]int32{"isrbench-txn-0": 24, "isrbench-txn-1": 25, "a": 47} {
		if got := PartitionFor(id, 50); got != want {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", id, got, want)
		}
	}
}
