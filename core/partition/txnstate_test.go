package partition

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
)

// txnBatch is pidBatch with the transactional attribute bit.
func txnBatch(pid int64, epoch int16, seq int32, n int, tag string) []byte {
	return txnBatchAt(pid, epoch, seq, n, tag, 0)
}

// txnBatchAt is txnBatch with the records' timestamp tsMs.
func txnBatchAt(pid int64, epoch int16, seq int32, n int, tag string, tsMs int64) []byte {
	b := pidBatchAt(pid, epoch, seq, n, tag, tsMs)
	binary.BigEndian.PutUint16(b[21:], records.TransactionalBit)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// replicate copies the leader's new batches to the follower and reports the follower's LEO
// to the leader, so the HW advances; then once more so the follower learns the HW.
func replicate(t *testing.T, leader, follower *Replica) {
	t.Helper()
	copyToFollower(t, leader, follower)
	if _, err := leader.UpdateFollower(follower.BrokerID(), -1, follower.LEO(), follower.LogStart()); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(nil, leader.HW()); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t *testing.T, r *Replica, blob []byte) int64 {
	t.Helper()
	info, err := r.AppendAsLeader(blob, 1)
	if err != nil {
		t.Fatal(err)
	}
	return info.FirstOffset
}

func mustMarker(t *testing.T, r *Replica, pid int64, epoch int16, commit bool) int64 {
	t.Helper()
	info, err := r.AppendMarkerAsLeader(pid, epoch, 0, commit, 0)
	if err != nil {
		t.Fatal(err)
	}
	return info.FirstOffset
}

func wantLSO(t *testing.T, r *Replica, want int64) {
	t.Helper()
	if got := r.LSO(); got != want {
		t.Fatalf("broker %d: LSO %d (HW %d, LEO %d), want %d", r.BrokerID(), got, r.HW(), r.LEO(), want)
	}
	if r.LSO() > r.HW() {
		t.Fatalf("LSO %d > HW %d", r.LSO(), r.HW())
	}
}

// TestTxnLSOAndAbortedIndex walks Kafka's rules: the LSO stops at the first open
// transaction, and at a closed one until the HW passes its marker; aborted transactions are
// listed for the fetch ranges that overlap them; followers, a reopened replica and a new
// leader hold the same state.
func TestTxnLSOAndAbortedIndex(t *testing.T) {
	dir0 := t.TempDir()
	r0 := realReplica(t, dir0, 0)
	r1 := realReplica(t, t.TempDir(), 1)
	if err := r0.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeFollower(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r0, oneBatch(1))                         // 0
	first1 := mustAppend(t, r0, txnBatch(1, 0, 0, 2, "a")) // 1-2
	mustAppend(t, r0, oneBatch(1))                         // 3
	first2 := mustAppend(t, r0, txnBatch(2, 0, 0, 1, "b")) // 4
	mustAppend(t, r0, txnBatch(1, 0, 2, 1, "a"))           // 5
	replicate(t, r0, r1)
	wantLSO(t, r0, first1)
	abortAt := mustMarker(t, r0, 1, 0, false) // 6
	wantLSO(t, r0, first1)                    // the HW has not passed the marker
	replicate(t, r0, r1)
	wantLSO(t, r0, first2)
	commitAt := mustMarker(t, r0, 2, 0, true) // 7
	wantLSO(t, r0, first2)
	replicate(t, r0, r1)
	wantLSO(t, r0, r0.HW())
	if r0.HW() != commitAt+1 {
		t.Fatalf("HW %d, want %d", r0.HW(), commitAt+1)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: first1, LastOffset: abortAt}}
	for _, c := range []struct {
		from, upTo int64
		want       []AbortedTxn
	}{
		{0, 8, want}, {6, 8, want}, {0, 2, want}, {0, 1, nil}, {7, 8, nil},
	} {
		if got := abortedOf(t, r0, c.from, c.upTo); !slices.Equal(got, c.want) {
			t.Fatalf("aborted [%d, %d): %v, want %v", c.from, c.upTo, got, c.want)
		}
	}
	// A third transaction stays open; the follower and a reopened leader agree.
	first3 := mustAppend(t, r0, txnBatch(3, 0, 0, 1, "c"))
	mustAppend(t, r0, oneBatch(1))
	replicate(t, r0, r1)
	wantLSO(t, r0, first3)
	for _, r := range []*Replica{r0, r1} {
		if got := abortedOf(t, r, 0, 100); !slices.Equal(got, want) {
			t.Fatalf("broker %d aborted %v, want %v", r.BrokerID(), got, want)
		}
		if got := r.OpenTxns(); len(got) != 1 || got[3] != first3 {
			t.Fatalf("broker %d open %v, want 3 at %d", r.BrokerID(), got, first3)
		}
	}
	// Failover: r1 leads and has the same LSO.
	if err := r0.MakeFollower(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeLeader(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, r1, first3)
	if err := r0.Close(); err != nil {
		t.Fatal(err)
	}
	r0 = realReplica(t, dir0, 0)
	if got := abortedOf(t, r0, 0, 100); !slices.Equal(got, want) {
		t.Fatalf("reopened: aborted %v, want %v", got, want)
	}
	if got := r0.OpenTxns(); len(got) != 1 || got[3] != first3 {
		t.Fatalf("reopened: open %v", got)
	}
	// The transaction ends on the new leader; the LSO catches up with the HW.
	if err := r0.MakeFollower(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	mustMarker(t, r1, 3, 0, true)
	replicate(t, r1, r0)
	wantLSO(t, r1, r1.HW())
	if len(r0.OpenTxns()) != 0 || len(r1.OpenTxns()) != 0 {
		t.Fatalf("open after commit: %v %v", r0.OpenTxns(), r1.OpenTxns())
	}
}

// TestTxnFencingAndMarkers: a marker with a bumped epoch fences the old epoch's batches; a
// marker of an older epoch or an older coordinator is refused; a client may not write
// control batches nor plain batches inside its open transaction.
func TestTxnFencingAndMarkers(t *testing.T) {
	r := realLeader(t)
	mustAppend(t, r, txnBatch(7, 0, 0, 1, "x"))
	_, err := r.AppendAsLeader(pidBatch(7, 0, 1, 1, "plain"), 1)
	wantCode(t, err, kerr.InvalidTxnState)
	// Re-initialisation: the coordinator aborts with the bumped epoch 1.
	if _, err := r.AppendMarkerAsLeader(7, 1, 2, false, 0); err != nil {
		t.Fatal(err)
	}
	_, err = r.AppendAsLeader(txnBatch(7, 0, 1, 1, "zombie"), 1)
	wantCode(t, err, kerr.InvalidProducerEpoch)
	_, err = r.AppendMarkerAsLeader(7, 0, 2, true, 0)
	wantCode(t, err, kerr.InvalidProducerEpoch)
	_, err = r.AppendMarkerAsLeader(7, 1, 1, true, 0)
	wantCode(t, err, kerr.TransactionCoordinatorFenced)
	mustAppend(t, r, txnBatch(7, 1, 0, 1, "new epoch"))
	_, err = r.AppendAsLeader(records.AppendControlBatch(nil, 7, 1, 2, true, 0), 1)
	wantCode(t, err, kerr.InvalidRecord)
	if got := r.OpenTxns(); len(got) != 1 {
		t.Fatalf("open %v", got)
	}
}

// abortedOf returns r's aborted transactions of [from, upTo), failing t on an error.
func abortedOf(t *testing.T, r *Replica, from, upTo int64) []AbortedTxn {
	t.Helper()
	got, err := r.AppendAbortedTxns(nil, from, upTo)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTxnOpenAcrossEpochBump: as in Kafka's ProducerAppendInfo, a transactional batch of a
// newer epoch, arriving while the producer's older-epoch transaction is still open here (its
// marker never reached this log: lost with the replicas that held it), continues that
// transaction rather than starting one: the open transaction keeps its first offset, and the
// next marker ends it from there. Only the coordinator decides an outcome; the partition does
// not abort on its own.
func TestTxnOpenAcrossEpochBump(t *testing.T) {
	r := realLeader(t)
	first := mustAppend(t, r, txnBatch(7, 0, 0, 1, "old"))
	mustAppend(t, r, txnBatch(7, 2, 0, 1, "new epoch"))
	if got := r.OpenTxns(); len(got) != 1 || got[7] != first {
		t.Fatalf("open transactions %v, want producer 7 from %d", got, first)
	}
	if _, err := r.AppendMarkerAsLeader(7, 2, 0, false, 0); err != nil {
		t.Fatal(err)
	}
	if got := abortedOf(t, r, 0, r.LEO()); len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != first {
		t.Fatalf("aborted %+v, want producer 7 from %d", got, first)
	}
}
