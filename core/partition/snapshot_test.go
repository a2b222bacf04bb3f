package partition

import (
	"encoding/binary"
	"hash/crc32"
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

// TestDecodeSnapshotV1: a snapshot an older build wrote (version 1, no last offset per
// producer) still loads; each producer's last offset is its newest batch's, or just below
// the snapshot's offset for a producer seen in a marker only.
func TestDecodeSnapshotV1(t *testing.T) {
	be := binary.BigEndian
	b := be.AppendUint16(nil, 1)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint64(b, 16)
	b = be.AppendUint32(b, 2)
	for _, p := range []struct {
		id      int64
		batches int
	}{{1, 1}, {2, 0}} {
		b = be.AppendUint64(b, uint64(p.id))
		b = be.AppendUint16(b, 2)
		b = be.AppendUint32(b, 3)
		b = be.AppendUint64(b, ^uint64(0)) // no open transaction
		b = be.AppendUint32(b, uint32(p.batches))
		for range p.batches {
			for _, v := range []uint32{0, 4} {
				b = be.AppendUint32(b, v)
			}
			for _, v := range []uint64{10, 14, 99} {
				b = be.AppendUint64(b, v)
			}
		}
	}
	b = be.AppendUint32(b, 0) // unreplicated
	b = be.AppendUint32(b, 0) // aborted
	be.PutUint32(b[2:], crc32.Checksum(b[6:], crcTable))
	s, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if e := s.entries[1]; e == nil || e.epoch != 2 || e.coordEpoch != 3 || e.n != 1 || e.lastAt != 14 {
		t.Fatalf("producer 1: %+v", e)
	}
	if e := s.entries[2]; e == nil || e.n != 0 || e.lastAt != 15 {
		t.Fatalf("producer 2 (a marker only): %+v", e)
	}
	// Its last timestamps: the newest batch's, unknown for a marker only.
	if s.entries[1].lastTs != 99 || s.entries[2].lastTs != -1 {
		t.Fatalf("last timestamps %d and %d, want 99 and -1", s.entries[1].lastTs, s.entries[2].lastTs)
	}
	// The same state written today (snapshotVersion) reads back the same.
	ps := &producerState{producers: s.entries}
	s2, err := decodeSnapshot(ps.encodeSnapshotLocked(16, nil))
	if err != nil {
		t.Fatal(err)
	}
	for id, e := range s.entries {
		if e2 := s2.entries[id]; e2 == nil || e2.epoch != e.epoch || e2.lastAt != e.lastAt || e2.lastTs != e.lastTs || e2.n != e.n {
			t.Fatalf("producer %d: version %d reads %+v, version 1 %+v", id, snapshotVersion, e2, e)
		}
	}
}
