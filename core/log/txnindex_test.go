package log

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// txnScript writes transactions to a log as a partition leader does: data batches of
// transactional producers, COMMIT / ABORT markers, and for every ABORT the .txnindex entry
// (AppendAbortedTxn). It remembers every aborted transaction, the reference the index is
// checked against.
type txnScript struct {
	t       *testing.T
	l       *Log
	ongoing map[int64]int64
	aborted []AbortedTxn
	offs    []int64 // offsets of the transactional batches
}

func (s *txnScript) data(pid int64) int64 {
	s.t.Helper()
	recs := []records.Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 300)}}
	info := mustAppend(s.t, s.l, records.AppendTxnBatch(nil, pid, 0, 1000, recs))
	if _, ok := s.ongoing[pid]; !ok {
		s.ongoing[pid] = info.FirstOffset
	}
	s.offs = append(s.offs, info.FirstOffset)
	return info.FirstOffset
}

func (s *txnScript) plain() { mustAppend(s.t, s.l, batch(1, 300, "plain", 1000)) }

func (s *txnScript) end(pid int64, commit bool) int64 {
	s.t.Helper()
	info := mustAppend(s.t, s.l, records.AppendControlBatch(nil, pid, 0, 0, commit, 1000))
	s.offs = append(s.offs, info.FirstOffset)
	first, ok := s.ongoing[pid]
	if !ok {
		s.t.Fatalf("producer %d has no open transaction", pid)
	}
	delete(s.ongoing, pid)
	if !commit {
		lso := info.FirstOffset + 1
		for _, f := range s.ongoing {
			lso = min(lso, f)
		}
		a := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: info.FirstOffset, LastStableOffset: lso}
		if err := s.l.AppendAbortedTxn(a); err != nil {
			s.t.Fatal(err)
		}
		s.aborted = append(s.aborted, a)
	}
	return info.FirstOffset
}

// wantAborted: every aborted transaction of the range, as a read_committed fetch of [from,
// upTo) must know them.
func wantAborted(all []AbortedTxn, from, upTo int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range all {
		if a.LastOffset >= from && a.FirstOffset < upTo {
			out = append(out, a)
		}
	}
	return out
}

// checkAborted compares AppendAbortedTxns with the reference for every range of the log.
func checkAborted(t *testing.T, l *Log, all []AbortedTxn, what string) {
	t.Helper()
	for from := l.LogStart(); from < l.LEO(); from++ {
		for upTo := from + 1; upTo <= l.LEO(); upTo++ {
			got, err := l.AppendAbortedTxns(nil, from, upTo)
			if err != nil {
				t.Fatalf("%s: [%d, %d): %v", what, from, upTo, err)
			}
			if want := wantAborted(all, from, upTo); !slices.Equal(got, want) {
				t.Fatalf("%s: aborted transactions of [%d, %d): %+v, want %+v", what, from, upTo, got, want)
			}
		}
	}
}

// txnFiles returns the .txnindex files of dir, decoded.
func txnFiles(t *testing.T, fs vfs.FS, dir string) map[string][]AbortedTxn {
	t.Helper()
	ents, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]AbortedTxn{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), txnIndexExt) {
			continue
		}
		b, err := vfs.ReadFile(fs, filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if out[e.Name()], err = DecodeTxnIndex(b); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
	}
	return out
}

// TestTxnIndex: ABORT entries land in the .txnindex of their marker's segment (created by
// the first one, none for segments without aborts), read_committed ranges across segments get
// exactly their aborted transactions, Open keeps a good index and rebuilds a deleted, corrupt
// or stale one from the control batches, truncation drops the entries past the cut, and
// deleted segments take their index along.
func TestTxnIndex(t *testing.T) {
	fs := vfs.NewMemFS(nil)
	cfg := testConfig() // 4 KiB segments: ~11 batches each
	cfg.FS = fs
	const dir = "/d"
	l, _ := mustOpen(t, dir, cfg)
	s := &txnScript{t: t, l: l, ongoing: map[int64]int64{}}
	s.data(1)
	s.data(2)
	s.plain()
	s.end(1, false) // aborted, while 2 is open: LSO = 2's first
	for i := 0; i < 12; i++ {
		s.plain() // roll: 2's transaction spans segments
	}
	s.data(2)
	s.end(2, false)
	s.data(3)
	s.end(3, true)
	for i := 0; i < 25; i++ {
		s.plain() // two segments without transactions
	}
	s.data(4)
	s.data(5)
	s.end(5, false)
	s.end(4, false)
	s.data(6)
	s.plain()
	if len(s.aborted) != 4 || l.Segments() < 5 {
		t.Fatalf("script: %d aborted in %d segments", len(s.aborted), l.Segments())
	}
	files := txnFiles(t, fs, dir)
	var n int
	for name, ents := range files {
		n += len(ents)
		for _, a := range ents {
			base, _ := parseSegmentName(name, txnIndexExt)
			l.mu.RLock()
			seg := l.mu.segs[l.findSegment(a.LastOffset)]
			l.mu.RUnlock()
			if seg.base != base {
				t.Fatalf("%s holds the marker at %d of segment %d", name, a.LastOffset, seg.base)
			}
		}
	}
	if n != len(s.aborted) || len(files) != 3 {
		t.Fatalf("%d files with %d entries, want 3 with %d: %v", len(files), n, len(s.aborted), files)
	}
	checkAborted(t, l, s.aborted, "written")

	// A clean reopen keeps the files.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rec := mustOpen(t, dir, cfg)
	if rec.TxnIndexesRebuilt != 0 {
		t.Fatalf("clean reopen rebuilt %d txnindexes: %s", rec.TxnIndexesRebuilt, rec.Reason)
	}
	checkAborted(t, l, s.aborted, "reopened")

	// Deleted, corrupt and stale files are rebuilt at Open.
	staleBase := int64(-1) // a segment without transactions
	for _, seg := range l.mu.segs {
		if !slices.ContainsFunc(s.offs, func(o int64) bool { return o >= seg.base && o < seg.next }) {
			staleBase = seg.base
			break
		}
	}
	if staleBase < 0 {
		t.Fatal("script: every segment has transactions")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	if err := fs.Remove(filepath.Join(dir, names[0])); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(fs, filepath.Join(dir, names[1]), []byte("not an index")); err != nil {
		t.Fatal(err)
	}
	bad := AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 9, FirstOffset: 0, LastOffset: 0, LastStableOffset: 1})
	if err := vfs.WriteFileAtomic(fs, filepath.Join(dir, names[2]), append(bad[:0:0], bad...)); err != nil {
		t.Fatal(err) // an entry no marker of its segment gives
	}
	stale := filepath.Join(dir, segmentName(staleBase, txnIndexExt))
	if err := vfs.WriteFileAtomic(fs, stale, bad); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(dir, segmentName(999999, txnIndexExt))
	if err := vfs.WriteFileAtomic(fs, orphan, bad); err != nil {
		t.Fatal(err)
	}
	l, rec = mustOpen(t, dir, cfg)
	if rec.TxnIndexesRebuilt != 4 || !strings.Contains(rec.Reason, "txnindex") || !strings.Contains(rec.String(), "rebuilt 4 transaction indexes") {
		t.Fatalf("rebuilt %d txnindexes (%s), want 4", rec.TxnIndexesRebuilt, rec)
	}
	if got := txnFiles(t, fs, dir); len(got) != len(files) {
		t.Fatalf("after the rebuild %v, want %v", got, files)
	} else {
		for name, ents := range files {
			if !slices.Equal(got[name], ents) {
				t.Fatalf("rebuilt %s: %+v, want %+v", name, got[name], ents)
			}
		}
	}
	checkAborted(t, l, s.aborted, "rebuilt")

	// Truncation drops the entries at or past the cut (inside a segment's index and with the
	// segments after it).
	cut := s.aborted[3].LastOffset // 4's marker: 5's abort stays
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	kept := s.aborted[:3]
	checkAborted(t, l, kept, "truncated")
	cut = s.aborted[1].LastOffset - 1 // into the data before 2's second-segment marker
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	kept = s.aborted[:1]
	checkAborted(t, l, kept, "truncated twice")
	if got := txnFiles(t, fs, dir); len(got) != 1 {
		t.Fatalf("after truncation: %v, want only the first segment's", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rec = mustOpen(t, dir, cfg)
	if rec.TxnIndexesRebuilt != 0 {
		t.Fatalf("reopen after truncation rebuilt %d: %s", rec.TxnIndexesRebuilt, rec.Reason)
	}
	checkAborted(t, l, kept, "truncated, reopened")

	// Deleting a segment (log start past it) deletes its index.
	for l.Segments() < 3 {
		mustAppend(t, l, batch(1, 300, "plain", 1000))
	}
	l.mu.RLock()
	next := l.mu.segs[1].base
	l.mu.RUnlock()
	if _, err := l.IncrementLogStart(next); err != nil {
		t.Fatal(err)
	}
	if got := txnFiles(t, fs, dir); len(got) != 0 {
		t.Fatalf("after deleting the segment: %v", got)
	}
	checkAborted(t, l, nil, "segment deleted")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan txnindex: %v", err)
	}
}

// TestTxnIndexCrash: a machine crash keeps only what was fsynced; whatever the .txnindex
// files lost, Open rebuilds them from the control batches that survived.
func TestTxnIndexCrash(t *testing.T) {
	fs := vfs.NewMemFS(nil)
	cfg := testConfig()
	cfg.FS = fs
	l, _ := mustOpen(t, "/d", cfg)
	s := &txnScript{t: t, l: l, ongoing: map[int64]int64{}}
	for round := int64(0); round < 6; round++ {
		s.data(round)
		s.data(100 + round)
		s.end(round, round%2 == 1)
		for i := 0; i < 4; i++ {
			s.plain()
		}
		s.end(100+round, false)
	}
	checkAborted(t, l, s.aborted, "written")
	crashed := fs.CrashClone()
	l.Abandon()
	cfg.FS = crashed
	l2, rec := mustOpen(t, "/d", cfg)
	defer l2.Close()
	var kept []AbortedTxn
	for _, a := range s.aborted {
		if a.LastOffset < l2.LEO() {
			kept = append(kept, a)
		}
	}
	if l2.LEO() == 0 {
		t.Fatal("the crash lost every segment: the rolls fsync them")
	}
	t.Logf("after the crash: LEO %d of %d, %d of %d aborted, %s", l2.LEO(), l.LEO(), len(kept), len(s.aborted), rec)
	checkAborted(t, l2, kept, "after the crash")
}

func TestDecodeTxnIndexErrors(t *testing.T) {
	good := AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 3, LastOffset: 7, LastStableOffset: 5})
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:33], "not a multiple of 34"},
		{"version", append([]byte{0, 1}, good[2:]...), "version 1"},
		{"first past last", AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 8, LastOffset: 7, LastStableOffset: 8}), "first offset 8"},
		{"order", append(append([]byte{}, good...), good...), "not above the previous"},
	} {
		if _, err := DecodeTxnIndex(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if got, err := DecodeTxnIndex(good); err != nil || len(got) != 1 || got[0].LastStableOffset != 5 {
		t.Fatalf("good: %v %v", got, err)
	}
}

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 3, LastOffset: 7, LastStableOffset: 5}))
	f.Add([]byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, err := DecodeTxnIndex(b)
		if err != nil {
			return
		}
		var out []byte
		for _, a := range ents {
			out = AppendTxnIndexEntry(out, a)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b)
		}
	})
}
