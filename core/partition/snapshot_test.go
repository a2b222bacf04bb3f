package partition

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// txnView is what a replica's producer and transaction state answers.
type txnView struct {
	Producers []ProducerInfo
	Open      map[int64]int64
	Aborted   []AbortedTxn
	AbortErr  string // reading the aborted transactions failed
}

func viewOf(r *Replica) txnView {
	v := txnView{Producers: r.ProducerStates(), Open: r.OpenTxns()}
	var err error
	if v.Aborted, err = r.AppendAbortedTxns(nil, 0, 1<<62); err != nil {
		v.AbortErr = err.Error()
	}
	return v
}

// TestProducerSnapshot: Close writes a snapshot that the next open loads (and removes); an
// older snapshot is loaded and the batches after it replayed; a damaged one is ignored; each
// way the state equals the one rebuilt from the whole log.
func TestProducerSnapshot(t *testing.T) {
	dir := t.TempDir()
	r := realReplica(t, dir, 0)
	if err := r.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, txnBatch(1, 0, 0, 2, "a"))
	mustAppend(t, r, pidBatch(2, 0, 0, 1, "idem"))
	mustMarker(t, r, 1, 0, false)
	mustAppend(t, r, txnBatch(3, 0, 0, 1, "b"))
	r.writeSnapshot() // at offset 5
	early, err := os.ReadFile(snapshotPath(dir, r.LEO()))
	if err != nil {
		t.Fatal(err)
	}
	earlyAt := r.LEO()
	mustMarker(t, r, 3, 0, true)
	mustAppend(t, r, txnBatch(4, 0, 0, 1, "c"))
	mustAppend(t, r, pidBatch(2, 0, 1, 1, "idem"))
	want := viewOf(r)
	if len(want.Aborted) != 1 || len(want.Open) != 1 || len(want.Producers) != 4 {
		t.Fatalf("state before close: %+v", want)
	}
	leo := r.LEO()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapshotPath(dir, leo)); err != nil {
		t.Fatalf("no snapshot at the LEO %d after Close: %v", leo, err)
	}
	if _, err := os.Stat(snapshotPath(dir, earlyAt)); !os.IsNotExist(err) {
		t.Fatalf("older snapshot kept: %v", err)
	}
	reopen := func(what string) {
		t.Helper()
		r2 := realReplica(t, dir, 0)
		if got := viewOf(r2); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: state %+v, want %+v", what, got, want)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix)); len(m) != 0 {
			t.Fatalf("%s: snapshots left after open: %v", what, m)
		}
		if err := r2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	reopen("snapshot at the LEO")
	// An older snapshot: loaded, then the batches after it replayed.
	for _, m := range must(filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))) {
		os.Remove(m)
	}
	if err := os.WriteFile(snapshotPath(dir, earlyAt), early, 0o644); err != nil {
		t.Fatal(err)
	}
	reopen("older snapshot plus replay")
	// A damaged snapshot: ignored, the whole log replayed.
	bad := slices.Clone(early)
	bad[len(bad)-1] ^= 0xff
	os.Remove(snapshotPath(dir, leo))
	if err := os.WriteFile(snapshotPath(dir, earlyAt), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	reopen("damaged snapshot")
	// A snapshot past the LEO (the log lost its tail in a crash): ignored.
	os.Remove(snapshotPath(dir, leo))
	if err := os.WriteFile(snapshotPath(dir, leo+10), early, 0o644); err != nil {
		t.Fatal(err)
	}
	reopen("snapshot past the LEO")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func FuzzDecodeSnapshot(f *testing.F) {
	ps := &producerState{producers: map[int64]*producerEntry{1: {epoch: 2, coordEpoch: 3}}}
	ps.producers[1].push(batchMeta{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffset: 14})
	ps.txn.beginLocked(1, 10)
	_ = ps.txn.endLocked(1, false, 15, nil)
	f.Add(ps.encodeSnapshotLocked(16, nil))
	f.Add([]byte{0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(b)
		if err == nil {
			for _, e := range s.entries {
				if e.n > NumBatchesToRetain {
					t.Fatalf("%d batches", e.n)
				}
			}
		}
	})
}
