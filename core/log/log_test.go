package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAppendReadAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l, rec := mustOpen(t, dir, testConfig())
	if rec.Segments != 1 || rec.TruncatedAtOffset != -1 || l.LEO() != 0 || l.LogStart() != 0 {
		t.Fatalf("fresh log: %+v LEO %d", rec, l.LEO())
	}
	var want []logRec
	var leo int64
	for i := 0; i < 60; i++ {
		n := 1 + i%5
		b := batch(n, 50+i*3, fmt.Sprintf("b%d", i), int64(1000+i))
		info := mustAppend(t, l, b)
		if info.FirstOffset != leo || info.LastOffset != leo+int64(n)-1 || info.Records != int64(n) || info.Batches != 1 || info.Bytes != int64(len(b)) || info.MaxTimestamp != int64(1000+i) {
			t.Fatalf("append %d: %+v (LEO before %d)", i, info, leo)
		}
		for j := 0; j < n; j++ {
			want = append(want, logRec{leo + int64(j), fmt.Sprintf("b%d", i), fmt.Sprintf("b%d-%d", i, j)})
		}
		leo += int64(n)
		if l.LEO() != leo {
			t.Fatalf("LEO %d want %d", l.LEO(), leo)
		}
	}
	if l.Segments() < 5 {
		t.Fatalf("expected several segments with log.segment.bytes=4096, got %d", l.Segments())
	}
	for _, f := range segFiles(t, dir, ".log") {
		st, _ := os.Stat(f)
		if st.Size() > 4096 {
			t.Fatalf("segment %s is %d bytes > log.segment.bytes", f, st.Size())
		}
	}
	got := allRecords(t, l)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records differ:\n got %v\nwant %v", got, want)
	}
	// Every offset is readable and the slice starts with the batch containing it.
	for off := int64(0); off < leo; off++ {
		s, err := l.Read(off, leo, 1<<20, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if s.FirstOffset > off || s.NextOffset <= off || s.Size == 0 {
			t.Fatalf("Read(%d) = %+v", off, s)
		}
		b, err := s.ReadAll(nil)
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		if h, err := records.Validate(b); err != nil || h.BaseOffset != s.FirstOffset {
			t.Fatalf("Read(%d) bytes: %+v %v", off, h, err)
		}
	}
	size := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, rec2 := mustOpen(t, dir, testConfig())
	defer l2.Close()
	if rec2.TruncatedBytes != 0 || rec2.IndexesRebuilt != 0 || rec2.Reason != "" || rec2.RecoveredFrom != leo || l2.LEO() != leo || l2.Size() != size {
		t.Fatalf("clean reopen: %v (LEO %d size %d)", rec2, l2.LEO(), l2.Size())
	}
	if got := allRecords(t, l2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records differ after reopen")
	}
	if l2.Segments() != rec2.Segments {
		t.Fatalf("Segments %d vs recovery %d", l2.Segments(), rec2.Segments)
	}
}

func TestMultiBatchBlobAndIndex(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l, _ := mustOpen(t, dir, cfg)
	var blob []byte
	for i := 0; i < 10; i++ {
		blob = append(blob, batch(3, 100, fmt.Sprintf("m%d", i), 5)...)
	}
	info := mustAppend(t, l, blob)
	if info.FirstOffset != 0 || info.LastOffset != 29 || info.Batches != 10 || info.Records != 30 {
		t.Fatalf("%+v", info)
	}
	// Offsets were patched in place in the caller's blob.
	var bases []int64
	records.Split(blob, func(_ []byte, h records.Header) error {
		bases = append(bases, h.BaseOffset)
		if h.PartitionLeaderEpoch != 1 {
			t.Errorf("epoch not patched: %d", h.PartitionLeaderEpoch)
		}
		return nil
	})
	if fmt.Sprint(bases) != "[0 3 6 9 12 15 18 21 24 27]" {
		t.Fatalf("bases %v", bases)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Index: one entry each time > 256 bytes were appended since the last one.
	idx, err := os.ReadFile(filepath.Join(dir, segmentName(0, ".index")))
	if err != nil {
		t.Fatal(err)
	}
	bsize := len(blob) / 10
	var want []byte
	since := 0
	for i := 0; i < 10; i++ {
		if since > 256 {
			want = append(want, 0, 0, 0, byte(3*i), 0, 0, byte((i*bsize)>>8), byte(i*bsize))
			since = 0
		}
		since += bsize
	}
	if !bytes.Equal(idx, want) {
		t.Fatalf("index\n got %x\nwant %x", idx, want)
	}
	l.Close()
}

func TestReadBoundaries(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	// Batches: [0,3) [3,6) [6,9) [9,12), each bs bytes, one segment.
	var bs int64
	for i := 0; i < 4; i++ {
		b := batch(3, 40, "r", 1)
		bs = int64(len(b))
		mustAppend(t, l, b)
	}
	tests := []struct {
		name              string
		off, max          int64
		maxBytes          int
		minOne            bool
		first, next, size int64
	}{
		{"whole log", 0, 12, 1 << 20, false, 0, 12, 4 * bs},
		{"mid batch start", 4, 12, 1 << 20, false, 3, 12, 3 * bs},
		{"maxOffset boundary", 0, 6, 1 << 20, false, 0, 6, 2 * bs},
		{"maxOffset mid batch excludes it", 0, 7, 1 << 20, false, 0, 6, 2 * bs},
		{"maxOffset inside first batch", 1, 2, 1 << 20, false, 1, 1, 0},
		{"maxOffset clamped to LEO", 0, 100, 1 << 20, false, 0, 12, 4 * bs},
		{"maxBytes two batches", 0, 12, int(2*bs + 1), false, 0, 6, 2 * bs},
		{"maxBytes exact", 0, 12, int(2 * bs), false, 0, 6, 2 * bs},
		{"maxBytes too small", 0, 12, int(bs - 1), false, 0, 0, 0},
		{"maxBytes too small minOne", 0, 12, int(bs - 1), true, 0, 3, bs},
		{"maxBytes zero minOne", 6, 12, 0, true, 6, 9, bs},
		{"offset == maxOffset", 5, 5, 1 << 20, true, 5, 5, 0},
		{"offset == LEO", 12, 12, 1 << 20, true, 12, 12, 0},
		{"tail batch", 11, 12, 1 << 20, false, 9, 12, bs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := l.Read(tt.off, tt.max, tt.maxBytes, tt.minOne)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()
			if s.FirstOffset != tt.first || s.NextOffset != tt.next || s.Size != tt.size {
				t.Fatalf("got first %d next %d size %d, want %d %d %d", s.FirstOffset, s.NextOffset, s.Size, tt.first, tt.next, tt.size)
			}
			if s.Size > 0 && s.Pos != (tt.first/3)*bs {
				t.Fatalf("pos %d", s.Pos)
			}
		})
	}
	for _, off := range []int64{-1, 13, 1000} {
		if _, err := l.Read(off, 12, 100, true); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("Read(%d): %v, want OFFSET_OUT_OF_RANGE", off, err)
		}
	}
	for off, want := range map[int64]int64{0: 0, 2: 0, 3: 3, 11: 9, 12: 12, 50: 12} {
		if got, err := l.BatchBoundaryAtOrBelow(off); err != nil || got != want {
			t.Fatalf("BatchBoundaryAtOrBelow(%d) = %d, %v; want %d", off, got, err, want)
		}
	}
	if _, err := l.BatchBoundaryAtOrBelow(-1); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("BatchBoundaryAtOrBelow(-1): %v", err)
	}
	if b, err := l.Bytes(3, 9); err != nil || int64(len(b)) != 2*bs {
		t.Fatalf("Bytes(3,9): %d bytes, %v", len(b), err)
	}
	if _, err := l.Bytes(0, 13); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("Bytes past LEO: %v", err)
	}
}

func TestReadAcrossSegmentsStaysInOne(t *testing.T) {
	cfg := testConfig()
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batch(2, 500, "s", 1))
	}
	s, err := l.Read(0, l.LEO(), 1<<30, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if s.NextOffset >= l.LEO() || s.Size > cfg.SegmentBytes {
		t.Fatalf("slice spans segments: %+v (LEO %d)", s, l.LEO())
	}
	s2, err := l.Read(s.NextOffset, l.LEO(), 1<<30, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	if s2.FirstOffset != s.NextOffset || s2.Pos != 0 || s2.File == s.File {
		t.Fatalf("next read %+v", s2)
	}
}

func TestAppendValidation(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	good := batch(2, 10, "g", 1)
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	big := batch(1, 5000, "big", 1)
	wrongCount := append([]byte(nil), good...)
	binaryPut32(wrongCount[57:], 1)
	restampCRC(wrongCount)
	tests := []struct {
		name string
		blob []byte
		want error
	}{
		{"empty", nil, kerr.InvalidRecord},
		{"bad crc", bad, kerr.CorruptMessage},
		{"good then bad crc", append(append([]byte(nil), good...), bad...), kerr.CorruptMessage},
		{"trailing garbage", append(append([]byte(nil), good...), 1, 2, 3), kerr.CorruptMessage},
		{"batch larger than segment", big, kerr.RecordListTooLarge},
		{"recordsCount vs lastOffsetDelta", wrongCount, kerr.InvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(tt.blob, true, 0); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if l.LEO() != 0 || l.Size() != 0 {
				t.Fatalf("something was written: LEO %d size %d", l.LEO(), l.Size())
			}
		})
	}
}

func binaryPut32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

func restampCRC(b []byte) {
	h, _ := records.ParseHeader(b)
	binaryPut32(b[17:], crc32c(b[21:h.Size()]))
}

func TestFollowerAppend(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	blob := append(batchAt(0, 3, 10, "f"), batchAt(3, 2, 10, "f")...)
	info, err := l.Append(blob, false, 0)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 4 || l.LEO() != 5 {
		t.Fatalf("follower append: %+v %v LEO %d", info, err, l.LEO())
	}
	h, _ := records.ParseHeader(blob)
	if h.PartitionLeaderEpoch != -1 {
		t.Fatalf("follower append patched the epoch")
	}
	for _, tt := range []struct {
		name string
		blob []byte
	}{
		{"gap", batchAt(6, 1, 10, "x")},
		{"overlap", batchAt(4, 1, 10, "x")},
		{"not contiguous inside blob", append(batchAt(5, 1, 10, "x"), batchAt(7, 1, 10, "x")...)},
	} {
		if _, err := l.Append(tt.blob, false, 0); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	if l.LEO() != 5 {
		t.Fatalf("LEO moved to %d", l.LEO())
	}
	if _, err := l.Append(batchAt(5, 1, 10, "ok"), false, 0); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, allRecords(t, l), 0, 6)
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 5; i++ {
		mustAppend(t, l, batch(2, 100, "t", 1))
	}
	leo := l.LEO()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	next := batch(2, 100, "torn", 1)
	records.SetBaseOffset(next, leo)
	for _, cut := range []int{10, len(next) / 2, len(next) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			segs := segFiles(t, dir, ".log")
			f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(next[:cut])
			f.Close()
			l, rec := mustOpen(t, dir, testConfig())
			defer l.Close()
			if rec.TruncatedBytes != int64(cut) || rec.TruncatedAtOffset != leo || !strings.Contains(rec.Reason, "torn") {
				t.Fatalf("recovery %v", rec)
			}
			if l.LEO() != leo {
				t.Fatalf("LEO %d want %d", l.LEO(), leo)
			}
			checkContiguous(t, allRecords(t, l), 0, leo)
			// The log appends after the truncated tail.
			mustAppend(t, l, batch(1, 10, "after", 1))
			if err := l.TruncateTo(leo); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptMidSegment(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batch(2, 150, "c", 1))
	}
	if l.Segments() < 3 {
		t.Fatalf("want >= 3 segments, got %d", l.Segments())
	}
	l.Close()
	segs := segFiles(t, dir, ".log")
	// Corrupt the 3rd batch of the first segment (a payload byte: only the CRC notices).
	first, _ := os.ReadFile(segs[0])
	var pos, off int64
	for i := 0; i < 2; i++ {
		h, _ := records.ParseHeader(first[pos:])
		pos += int64(h.Size())
		off = h.NextOffset()
	}
	first[pos+70] ^= 0x55
	os.WriteFile(segs[0], first, 0o644)

	// With the recovery point at the LEO, only headers are scanned: the flip goes unnoticed
	// (Kafka behaviour: data below the recovery point was fsynced and is trusted).
	l, rec := mustOpen(t, dir, testConfig())
	if rec.TruncatedBytes != 0 {
		t.Fatalf("corruption below the recovery point was checked: %v", rec)
	}
	l.Close()
	// Without a recovery point, everything is CRC-checked.
	os.Remove(filepath.Join(dir, RecoveryPointFile))
	var total int64
	for _, s := range segs {
		st, _ := os.Stat(s)
		total += st.Size()
	}
	l, rec = mustOpen(t, dir, testConfig())
	defer l.Close()
	if rec.TruncatedAtOffset != off || rec.TruncatedBytes != total-pos || !strings.Contains(rec.Reason, "crc mismatch") || rec.RecoveredFrom != 0 {
		t.Fatalf("recovery %v (want cut at offset %d, %d bytes)", rec, off, total-pos)
	}
	if l.LEO() != off || l.Segments() != 1 || len(segFiles(t, dir, ".log")) != 1 || len(segFiles(t, dir, ".index")) != 1 {
		t.Fatalf("LEO %d segments %d files %v", l.LEO(), l.Segments(), segFiles(t, dir, ""))
	}
	checkContiguous(t, allRecords(t, l), 0, off)
}

func TestIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l, _ := mustOpen(t, dir, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batch(1, 100, "i", 1))
	}
	l.Close()
	idxPath := filepath.Join(dir, segmentName(0, ".index"))
	orig, _ := os.ReadFile(idxPath)
	if len(orig) == 0 {
		t.Fatal("index empty")
	}
	tests := []struct {
		name   string
		damage func()
		reason string
	}{
		{"missing", func() { os.Remove(idxPath) }, "missing"},
		{"torn entry", func() { os.WriteFile(idxPath, orig[:len(orig)-3], 0o644) }, "multiple of 8"},
		{"garbage", func() {
			g := append([]byte(nil), orig...)
			g[5] ^= 0x40
			os.WriteFile(idxPath, g, 0o644)
		}, "matches no batch"},
		{"too many entries", func() { os.WriteFile(idxPath, bytes.Repeat(orig, 30), 0o644) }, "entries for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.damage()
			l, rec := mustOpen(t, dir, cfg)
			defer l.Close()
			if rec.IndexesRebuilt != 1 || !strings.Contains(rec.Reason, tt.reason) || rec.TruncatedBytes != 0 {
				t.Fatalf("recovery %v", rec)
			}
			if got, _ := os.ReadFile(idxPath); !bytes.Equal(got, orig) {
				t.Fatalf("rebuilt index differs:\n got %x\nwant %x", got, orig)
			}
			checkContiguous(t, allRecords(t, l), 0, 20)
		})
	}
	// A valid prefix (an index that lags after a crash) is kept.
	os.WriteFile(idxPath, orig[:8], 0o644)
	l, rec := mustOpen(t, dir, cfg)
	defer l.Close()
	if rec.IndexesRebuilt != 0 {
		t.Fatalf("lagging index rebuilt: %v", rec)
	}
}

func TestOrphanAndGapSegments(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batch(2, 200, "g", 1))
	}
	leo := l.LEO()
	l.Close()
	segs := segFiles(t, dir, ".log")
	// Remove a middle segment: the ones after it no longer connect.
	os.Remove(segs[1])
	os.WriteFile(filepath.Join(dir, segmentName(999999, ".index")), []byte{1, 2}, 0o644)
	l, rec := mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.Segments() != 1 || !strings.Contains(rec.Reason, "previous segment ends") || rec.TruncatedAtOffset >= leo || rec.TruncatedBytes == 0 {
		t.Fatalf("recovery %v, segments %d", rec, l.Segments())
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(999999, ".index"))); !os.IsNotExist(err) {
		t.Fatalf("orphan index kept")
	}
	checkContiguous(t, allRecords(t, l), 0, l.LEO())
}

func TestTruncateThenAppend(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batch(3, 100, fmt.Sprint("x", i), 1))
	}
	segsBefore := l.Segments()
	// Mid-batch offset rounds down to the batch start.
	if err := l.TruncateTo(50); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 48 {
		t.Fatalf("LEO %d after TruncateTo(50), want 48", l.LEO())
	}
	// Into an earlier segment: later segments deleted.
	if err := l.TruncateTo(7); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 6 || l.Segments() >= segsBefore || len(segFiles(t, dir, ".log")) != l.Segments() {
		t.Fatalf("LEO %d segments %d (before %d) files %d", l.LEO(), l.Segments(), segsBefore, len(segFiles(t, dir, ".log")))
	}
	if err := l.TruncateTo(100); err != nil || l.LEO() != 6 {
		t.Fatalf("TruncateTo past LEO: %v LEO %d", err, l.LEO())
	}
	for i := 0; i < 10; i++ {
		info := mustAppend(t, l, batch(2, 100, "new", 1))
		if info.FirstOffset != int64(6+2*i) {
			t.Fatalf("append after truncate at %d", info.FirstOffset)
		}
	}
	want := allRecords(t, l)
	checkContiguous(t, want, 0, 26)
	if want[5].key != "x1" || want[6].key != "new" {
		t.Fatalf("content after truncate: %v", want[:8])
	}
	// Truncate exactly at a segment base keeps that segment, empty.
	l.Close()
	l, rec := mustOpen(t, dir, testConfig())
	if rec.TruncatedBytes != 0 || rec.Reason != "" || fmt.Sprint(allRecords(t, l)) != fmt.Sprint(want) {
		t.Fatalf("reopen after truncation: %v", rec)
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LEO() != 1000 || l.LogStart() != 1000 || l.Size() != 0 || l.Segments() != 1 {
		t.Fatalf("after TruncateFullyAndStartAt: LEO %d start %d size %d", l.LEO(), l.LogStart(), l.Size())
	}
	if _, err := l.Read(5, 1000, 100, true); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read below new start: %v", err)
	}
	if _, err := l.Append(batchAt(1000, 2, 10, "f"), false, 0); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, rec = mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LogStart() != 1000 || l.LEO() != 1002 || rec.Reason != "" {
		t.Fatalf("reopen: start %d LEO %d %v", l.LogStart(), l.LEO(), rec)
	}
	// TruncateTo below the log start restarts the log there.
	if err := l.TruncateTo(10); err != nil || l.LogStart() != 10 || l.LEO() != 10 {
		t.Fatalf("TruncateTo below start: %v start %d LEO %d", err, l.LogStart(), l.LEO())
	}
}

func TestTruncateLowersRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 10; i++ {
		mustAppend(t, l, batch(1, 10, "a", 1))
	}
	l.Flush()
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	_, lines, _ := ReadCheckpoint(vfs.OS, filepath.Join(dir, RecoveryPointFile))
	if fmt.Sprint(lines) != "[4]" {
		t.Fatalf("recovery point %v after truncation to 4", lines)
	}
	l.Close()
}

func TestRetention(t *testing.T) {
	// 10 segments of 4 batches each (SegmentBytes fits 4), timestamps 1000*i per segment.
	setup := func(t *testing.T, cfg Config) *Log {
		l, _ := mustOpen(t, t.TempDir(), cfg)
		for i := 0; i < 40; i++ {
			mustAppend(t, l, batch(1, 900, "r", int64(1000*(i/4))))
		}
		if l.Segments() != 10 {
			t.Fatalf("want 10 segments, got %d", l.Segments())
		}
		return l
	}
	t.Run("bytes", func(t *testing.T) {
		cfg := testConfig()
		l := setup(t, cfg)
		defer l.Close()
		segSize := l.Size() / 10
		cfg.RetentionBytes = 3*segSize + 1
		l.cfg.RetentionBytes = cfg.RetentionBytes
		n, err := l.ApplyRetention(0, 4) // HW 4: only the first segment may go
		if err != nil || n != 1 || l.LogStart() != 4 {
			t.Fatalf("HW-bounded: deleted %d, %v, start %d", n, err, l.LogStart())
		}
		n, err = l.ApplyRetention(0, l.LEO())
		if err != nil || n != 5 || l.Segments() != 4 || l.LogStart() != 24 || l.Size() != 4*segSize {
			t.Fatalf("deleted %d, %v, segments %d start %d size %d", n, err, l.Segments(), l.LogStart(), l.Size())
		}
		if _, err := l.Read(3, 40, 100, true); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("read of deleted offset: %v", err)
		}
		checkContiguous(t, allRecords(t, l), 24, 40)
	})
	t.Run("time", func(t *testing.T) {
		cfg := testConfig()
		cfg.RetentionMs = 2500
		l := setup(t, cfg)
		defer l.Close()
		// now 6000: segments with max timestamp < 3500 expire: ts 0,1000,2000,3000 -> 4 segments.
		n, err := l.ApplyRetention(6000, l.LEO())
		if err != nil || n != 4 || l.LogStart() != 16 {
			t.Fatalf("deleted %d, %v, start %d", n, err, l.LogStart())
		}
		// Everything expired: still never the active segment.
		n, err = l.ApplyRetention(1e9, l.LEO())
		if err != nil || n != 5 || l.Segments() != 1 || l.LogStart() != 36 {
			t.Fatalf("deleted %d, %v, segments %d start %d", n, err, l.Segments(), l.LogStart())
		}
		if files := segFiles(t, l.Dir(), ".log"); len(files) != 1 {
			t.Fatalf("files %v", files)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		cfg := testConfig()
		cfg.RetentionMs = -1
		l := setup(t, cfg)
		defer l.Close()
		if n, err := l.ApplyRetention(1e12, l.LEO()); n != 0 || err != nil {
			t.Fatalf("deleted %d %v", n, err)
		}
	})
}

func TestSliceOutlivesDeletion(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0
	l, _ := mustOpen(t, t.TempDir(), cfg)
	for i := 0; i < 12; i++ {
		mustAppend(t, l, batch(1, 900, fmt.Sprint("d", i), 1))
	}
	s, err := l.Read(0, l.LEO(), 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(0, l.LEO()); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if _, err := os.Stat(s.File.Name()); !os.IsNotExist(err) {
		t.Fatalf("segment file not unlinked: %v", err)
	}
	b, err := s.ReadAll(nil)
	if err != nil {
		t.Fatalf("slice read after deletion: %v", err)
	}
	if h, err := records.Validate(b); err != nil || h.BaseOffset != 0 {
		t.Fatalf("slice bytes: %v", err)
	}
	f := s.File
	s.Release()
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("file still open after last release: %v", err)
	}
	// Close with a live slice: the slice stays readable.
	s2, _ := l.Read(l.LogStart(), l.LEO(), 1<<20, true)
	l.Close()
	if _, err := s2.ReadAll(nil); err != nil {
		t.Fatalf("slice after Close: %v", err)
	}
	s2.Release()
	if _, err := l.Read(0, 1, 1, true); !errors.Is(err, ErrClosed) || !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestPoisonOnWriteFailure(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	w := &failingWriter{okWrites: 3, torn: true}
	cfg.Writer = w
	l, _ := mustOpen(t, dir, cfg)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, batch(1, 50, "ok", 1))
	}
	_, err := l.Append(batch(1, 50, "fail", 1), true, 0)
	if !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, errInjected) {
		t.Fatalf("failed write: %v", err)
	}
	if l.LEO() != 3 {
		t.Fatalf("LEO advanced past a failed write: %d", l.LEO())
	}
	writes := w.writes.Load()
	for name, f := range map[string]func() error{
		"append":   func() error { _, err := l.Append(batch(1, 5, "x", 1), true, 0); return err },
		"read":     func() error { _, err := l.Read(0, 3, 100, true); return err },
		"flush":    l.Flush,
		"truncate": func() error { return l.TruncateTo(1) },
		"retain":   func() error { _, err := l.ApplyRetention(0, 3); return err },
		"boundary": func() error { _, err := l.BatchBoundaryAtOrBelow(1); return err },
	} {
		if err := f(); !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, errInjected) {
			t.Fatalf("%s on a poisoned log: %v", name, err)
		}
	}
	if w.writes.Load() != writes {
		t.Fatalf("poisoned log retried the write")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close of a poisoned log: %v", err)
	}
	// The torn bytes of the failed write are cleaned up by recovery.
	l, rec := mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LEO() != 3 || rec.TruncatedBytes == 0 || rec.TruncatedAtOffset != 3 {
		t.Fatalf("reopen: LEO %d %v", l.LEO(), rec)
	}
}

func TestPoisonOnFsyncFailure(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 1
	w := &failingWriter{okWrites: math.MaxInt64}
	cfg.Writer = w
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, batch(1, 10, "a", 1))
	if w.syncs.Load() != 1 {
		t.Fatalf("flush.messages=1: %d fsyncs after one append", w.syncs.Load())
	}
	w.failSync.Store(true)
	if _, err := l.Append(batch(1, 10, "b", 1), true, 0); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("fsync failure: %v", err)
	}
	if _, err := l.Append(batch(1, 10, "c", 1), true, 0); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("after fsync failure: %v", err)
	}
}

func TestFlushPolicies(t *testing.T) {
	t.Run("messages", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushMessages = 5
		w := &countingWriter{}
		cfg.Writer = w
		l, _ := mustOpen(t, t.TempDir(), cfg)
		defer l.Close()
		for i := 0; i < 12; i++ {
			mustAppend(t, l, batch(1, 10, "m", 1))
		}
		if w.syncs.Load() != 2 {
			t.Fatalf("12 records with flush.messages=5: %d fsyncs, want 2", w.syncs.Load())
		}
	})
	t.Run("ms", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushMs = 100
		now := int64(10_000)
		cfg.NowMs = func() int64 { return now }
		w := &countingWriter{}
		cfg.Writer = w
		l, _ := mustOpen(t, t.TempDir(), cfg)
		defer l.Close()
		mustAppend(t, l, batch(1, 10, "a", 1))
		now += 99
		mustAppend(t, l, batch(1, 10, "b", 1))
		if w.syncs.Load() != 0 {
			t.Fatalf("fsync before flush.ms elapsed")
		}
		now += 1
		mustAppend(t, l, batch(1, 10, "c", 1))
		if w.syncs.Load() != 1 {
			t.Fatalf("no fsync after flush.ms: %d", w.syncs.Load())
		}
	})
}

// TestPowerLoss crashes a log's file system (an in-memory one and the OS one through
// vfs.PowerLossFS) and recovers: only fsynced batches survive, nothing else is reported lost.
func TestPowerLoss(t *testing.T) {
	type crashFS interface {
		vfs.FS
		vfs.Crasher
	}
	for _, fsys := range []struct {
		name string
		mk   func(t *testing.T) (crashFS, string)
	}{
		{"memfs", func(t *testing.T) (crashFS, string) { return vfs.NewMemFS(nil), "/data/t-0" }},
		// Directory entries durable only once synced: a rolled segment is kept by the
		// directory fsync of the flush (the replica directory itself is the broker's to
		// make durable).
		{"strict memfs", func(t *testing.T) (crashFS, string) {
			fs := vfs.NewStrictMemFS(nil)
			if err := vfs.MkdirAllDurable(fs, "/data/t-0"); err != nil {
				t.Fatal(err)
			}
			return fs, "/data/t-0"
		}},
		{"os", func(t *testing.T) (crashFS, string) { return vfs.NewPowerLossFS(vfs.OS), t.TempDir() }},
	} {
		t.Run(fsys.name+"/flush.messages=1 keeps everything", func(t *testing.T) {
			fs, dir := fsys.mk(t)
			cfg := testConfig()
			cfg.FS = fs
			cfg.FlushMessages = 1
			l, _ := mustOpen(t, dir, cfg)
			for i := 0; i < 25; i++ {
				mustAppend(t, l, batch(2, 300, "p", 1))
			}
			leo := l.LEO()
			l.Abandon()
			if err := fs.Crash(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(batch(1, 1, "x", 1), true, 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("append after power loss: %v", err)
			}
			l, rec := mustOpen(t, dir, cfg)
			defer l.Close()
			if l.LEO() != leo || rec.TruncatedBytes != 0 {
				t.Fatalf("LEO %d want %d, %v", l.LEO(), leo, rec)
			}
			checkContiguous(t, allRecords(t, l), 0, leo)
		})
		t.Run(fsys.name+"/no flush drops unsynced", func(t *testing.T) {
			fs, dir := fsys.mk(t)
			cfg := testConfig()
			cfg.FS = fs
			l, _ := mustOpen(t, dir, cfg)
			for i := 0; i < 10; i++ {
				mustAppend(t, l, batch(2, 300, "s", 1))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed := l.LEO()
			for i := 0; i < 10; i++ {
				mustAppend(t, l, batch(2, 300, "u", 1))
			}
			// The segments rolled meanwhile were flushed when they rolled.
			flushed = max(flushed, activeBase(l))
			if flushed == l.LEO() {
				t.Fatalf("nothing left unflushed (LEO %d): the test needs an unflushed tail", l.LEO())
			}
			l.Abandon()
			if err := fs.Crash(); err != nil {
				t.Fatal(err)
			}
			l, rec := mustOpen(t, dir, cfg)
			defer l.Close()
			if l.LEO() != flushed {
				t.Fatalf("LEO %d after power loss, want the flushed %d (%v)", l.LEO(), flushed, rec)
			}
			checkContiguous(t, allRecords(t, l), 0, flushed)
			mustAppend(t, l, batch(1, 1, "again", 1))
		})
		t.Run(fsys.name+"/a roll flushes the rolled segment", func(t *testing.T) {
			fs, dir := fsys.mk(t)
			cfg := testConfig()
			cfg.FS = fs
			l, _ := mustOpen(t, dir, cfg)
			for l.Segments() < 4 {
				mustAppend(t, l, batch(1+int(l.LEO()%3), 200, "r", 1))
			}
			mustAppend(t, l, batch(1, 10, "tail", 1)) // unflushed, in the active segment
			rolled := activeBase(l)
			l.Abandon()
			if err := fs.Crash(); err != nil {
				t.Fatal(err)
			}
			l, rec := mustOpen(t, dir, cfg)
			defer l.Close()
			if l.LEO() != rolled || rec.TruncatedBytes != 0 || rec.IndexesRebuilt != 0 || rec.RecoveredFrom != rolled {
				t.Fatalf("after power loss: LEO %d, want every batch of the rolled segments (%d); %v", l.LEO(), rolled, rec)
			}
			checkContiguous(t, allRecords(t, l), 0, rolled)
		})
	}
}

// activeBase returns the base offset of the log's active segment.
func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.segs[len(l.mu.segs)-1].base
}

// TestConcurrentAppends: many goroutines append; every record lands once, offsets do not
// overlap, and each caller's records are in its order.
func TestConcurrentAppends(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	w := &countingWriter{}
	cfg.Writer = w
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	const G, N = 8, 150
	infos := make([][]AppendInfo, G)
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < N; i++ {
				n := 1 + (g+i)%3
				info, err := l.Append(batch(n, 60, fmt.Sprintf("g%d.%d", g, i), 1), true, 2)
				if err != nil {
					t.Error(err)
					return
				}
				infos[g] = append(infos[g], info)
			}
		}(g)
	}
	// A concurrent reader must only ever see whole, valid batches below the LEO.
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			leo := l.LEO()
			if leo == 0 {
				continue
			}
			s, err := l.Read(leo-1, leo, 1<<20, true)
			if err != nil {
				t.Error(err)
				return
			}
			b, err := s.ReadAll(nil)
			s.Release()
			if err == nil {
				err = records.Split(b, func([]byte, records.Header) error { return nil })
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readerDone
	total := 0
	seen := map[int64]bool{}
	for g := range infos {
		for i, info := range infos[g] {
			total += int(info.Records)
			if i > 0 && info.FirstOffset <= infos[g][i-1].LastOffset {
				t.Fatalf("goroutine %d append %d not after its previous one", g, i)
			}
			for o := info.FirstOffset; o <= info.LastOffset; o++ {
				if seen[o] {
					t.Fatalf("offset %d assigned twice", o)
				}
				seen[o] = true
			}
		}
	}
	if int64(total) != l.LEO() {
		t.Fatalf("LEO %d, appended %d records", l.LEO(), total)
	}
	rs := allRecords(t, l)
	checkContiguous(t, rs, 0, l.LEO())
	for g := range infos {
		for i, info := range infos[g] {
			r := rs[info.FirstOffset]
			if r.key != fmt.Sprintf("g%d.%d", g, i) {
				t.Fatalf("offset %d holds %q, want g%d.%d", info.FirstOffset, r.key, g, i)
			}
		}
	}
	t.Logf("%d appends in %d writes (group commit)", G*N, w.writes.Load())
	if w.writes.Load() > G*N+int64(l.Segments()) {
		t.Fatalf("more writes (%d) than appends", w.writes.Load())
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tt := range []struct {
		field string
		mod   func(*Config)
	}{
		{"log.segment.bytes", func(c *Config) { c.SegmentBytes = 10 }},
		{"log.segment.bytes", func(c *Config) { c.SegmentBytes = 1 << 32 }},
		{"log.index.interval.bytes", func(c *Config) { c.IndexIntervalBytes = -1 }},
		{"retention.bytes", func(c *Config) { c.RetentionBytes = -2 }},
		{"retention.ms", func(c *Config) { c.RetentionMs = -5 }},
		{"flush.messages", func(c *Config) { c.FlushMessages = 0 }},
		{"flush.ms", func(c *Config) { c.FlushMs = -1 }},
	} {
		c := DefaultConfig()
		tt.mod(&c)
		_, _, err := Open(t.TempDir(), c)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Fatalf("%s: %v", tt.field, err)
		}
	}
}

func TestWriters(t *testing.T) {
	if _, err := NewWriter("bogus"); err == nil || !strings.Contains(err.Error(), "pwritev, write or uring") {
		t.Fatalf("unknown writer: %v", err)
	}
	for _, name := range []string{"", "pwritev", "write", "uring"} {
		w, err := NewWriter(name)
		if err != nil {
			t.Fatal(err)
		}
		reason := WriterFallbackReason(name)
		t.Logf("%q -> %s (fallback: %q)", name, w.Name(), reason)
		if name == "uring" && (w.Name() == "uring") != (reason == "") {
			t.Fatalf("uring writer %s with fallback reason %q", w.Name(), reason)
		}
		cfg := testConfig()
		cfg.Writer = w
		cfg.FlushMessages = 7
		dir := t.TempDir()
		l, _ := mustOpen(t, dir, cfg)
		for i := 0; i < 20; i++ {
			blob := append(batch(2, 100, "w", 1), batch(1, 30, "w", 1)...)
			mustAppend(t, l, blob)
		}
		checkContiguous(t, allRecords(t, l), 0, 60)
		l.Close()
	}
	// pwritev with many buffers (past the stack array and IOV_MAX) and an empty one.
	f, err := os.Create(filepath.Join(t.TempDir(), "many"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bufs [][]byte
	var want []byte
	for i := 0; i < 2500; i++ {
		b := bytes.Repeat([]byte{byte(i)}, 1+i%7)
		if i == 3 {
			b = nil
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	if err := (PwritevWriter{}).WriteAt(f, 10, bufs); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	f.ReadAt(got, 10)
	if !bytes.Equal(got, want) {
		t.Fatal("pwritev wrote different bytes")
	}
}

func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leader-epoch-checkpoint")
	if v, lines, err := ReadCheckpoint(vfs.OS, path); v != 0 || lines != nil || err != nil {
		t.Fatalf("missing: %d %v %v", v, lines, err)
	}
	if err := WriteCheckpoint(vfs.OS, path, 0, []string{"0 0", "3 120"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("file %q", data)
	}
	// A crash between writing the temp file and the rename leaves a stale temp: the old
	// checkpoint is what a reader sees, and the next write replaces both.
	os.WriteFile(path+".tmp", []byte("0\n5\ngarb"), 0o644)
	if v, lines, err := ReadCheckpoint(vfs.OS, path); err != nil || v != 0 || fmt.Sprint(lines) != "[0 0 3 120]" {
		t.Fatalf("after crash: %d %v %v", v, lines, err)
	}
	if err := WriteCheckpoint(vfs.OS, path, 1, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if v, lines, err := ReadCheckpoint(vfs.OS, path); err != nil || v != 1 || fmt.Sprint(lines) != "[x]" {
		t.Fatalf("rewrite: %d %v %v", v, lines, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind")
	}
	if err := WriteCheckpoint(vfs.OS, path, 0, []string{"a\nb"}); err == nil {
		t.Fatal("newline in a line accepted")
	}
	for name, content := range map[string]string{
		"bad version": "x\n0\n", "bad count": "0\n-1\n", "short": "0\n3\na\nb\n", "long": "0\n1\na\nb\n", "empty": "",
	} {
		os.WriteFile(path, []byte(content), 0o644)
		if _, _, err := ReadCheckpoint(vfs.OS, path); err == nil {
			t.Fatalf("%s: malformed checkpoint accepted", name)
		}
	}
}

func TestCorruptRecoveryPointFile(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	mustAppend(t, l, batch(1, 10, "a", 1))
	l.Close()
	os.WriteFile(filepath.Join(dir, RecoveryPointFile), []byte("zzz"), 0o644)
	l, rec := mustOpen(t, dir, testConfig())
	defer l.Close()
	if rec.RecoveredFrom != 0 || !strings.Contains(rec.Reason, "recovery-point") || l.LEO() != 1 {
		t.Fatalf("%v", rec)
	}
}

func TestAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 30
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	src := batch(4, 256, "alloc", 1)
	blob := make([]byte, len(src))
	for i := 0; i < 100; i++ { // warm up: grow the tables
		copy(blob, src)
		mustAppend(t, l, blob)
	}
	n := testing.AllocsPerRun(500, func() {
		copy(blob, src)
		if _, err := l.Append(blob, true, 1); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Append allocates %v times per call", n)
	}
	leo := l.LEO()
	n = testing.AllocsPerRun(500, func() {
		s, err := l.Read(leo-4, leo, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	})
	if n != 0 {
		t.Fatalf("Read allocates %v times per call", n)
	}
}

// TestReadDuringTruncateAndRetention: readers racing truncation, appends and retention get
// whole valid batches or OFFSET_OUT_OF_RANGE, nothing else.
// TestBeforeLogStart: the SetBeforeLogStart hook sees the new log start of retention and of
// IncrementLogStart while every segment is still there, and its error stops the move.
func TestBeforeLogStart(t *testing.T) {
	cfg := testConfig()
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 40; i++ {
		mustAppend(t, l, batch(1, 900, "r", int64(1000*(i/4))))
	}
	var seen []int64
	var refuse error
	l.SetBeforeLogStart(func(newStart int64) error {
		if _, err := l.Read(l.LogStart(), l.LEO(), 100, true); err != nil {
			t.Errorf("hook at %d: the current log start %d unreadable: %v", newStart, l.LogStart(), err)
		}
		seen = append(seen, newStart)
		return refuse
	})
	segSize := l.Size() / 10
	l.cfg.RetentionBytes = 3*segSize + 1
	refuse = errors.New("disk gone")
	if n, err := l.ApplyRetention(0, l.LEO()); !errors.Is(err, refuse) || n != 0 || l.LogStart() != 0 || l.Segments() != 10 {
		t.Fatalf("refused retention: deleted %d, %v, log start %d, %d segments", n, err, l.LogStart(), l.Segments())
	}
	if n, err := l.IncrementLogStart(30); !errors.Is(err, refuse) || n != 0 || l.LogStart() != 0 {
		t.Fatalf("refused IncrementLogStart: deleted %d, %v, log start %d", n, err, l.LogStart())
	}
	refuse = nil
	if n, err := l.ApplyRetention(0, l.LEO()); err != nil || n != 6 || l.LogStart() != 24 {
		t.Fatalf("retention: deleted %d, %v, log start %d", n, err, l.LogStart())
	}
	if n, err := l.IncrementLogStart(30); err != nil || n != 1 || l.LogStart() != 30 {
		t.Fatalf("IncrementLogStart: deleted %d, %v, log start %d", n, err, l.LogStart())
	}
	if want := []int64{24, 30, 24, 30}; !slices.Equal(seen, want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
}

func TestReadDuringTruncateAndRetention(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 16 << 10
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				start, leo := l.LogStart(), l.LEO()
				if leo <= start {
					continue
				}
				off := start + int64(i*7+r)%(leo-start)
				s, err := l.Read(off, leo, 2048, true)
				if errors.Is(err, kerr.OffsetOutOfRange) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if s.Size > 0 && (s.FirstOffset > off || s.NextOffset <= off) {
					t.Errorf("Read(%d) = [%d, %d)", off, s.FirstOffset, s.NextOffset)
				}
				s.Release()
			}
		}(r)
	}
	for i := 0; i < 400; i++ {
		mustAppend(t, l, batch(1+i%3, 200, "t", 1))
		if i%10 == 9 {
			if err := l.TruncateTo(l.LEO() - 4); err != nil {
				t.Fatal(err)
			}
		}
		if i%50 == 49 {
			if _, err := l.ApplyRetention(0, l.LEO()); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
}

// Abandon (a killed process) closes the files but writes nothing: no fsync,
// no recovery point; the page cache keeps every appended byte, so a re-Open
// finds them all and CRC-checks them from the old recovery point.
func TestAbandon(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	w := &countingWriter{}
	cfg.Writer = w
	l, _ := mustOpen(t, dir, cfg)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, batch(2, 100, "a", 1))
	}
	leo := l.LEO()
	syncs := w.syncs.Load()
	l.Abandon()
	l.Abandon() // idempotent
	if got := w.syncs.Load(); got != syncs {
		t.Fatalf("Abandon fsynced %d times", got-syncs)
	}
	if _, err := l.Append(batch(1, 1, "x", 1), true, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Abandon: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after Abandon: %v", err)
	}
	l, rec := mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LEO() != leo || rec.RecoveredFrom != 0 {
		t.Fatalf("reopened: LEO %d want %d, recovered from %d want 0 (recovery point not moved)", l.LEO(), leo, rec.RecoveredFrom)
	}
	checkContiguous(t, allRecords(t, l), 0, leo)
}

// TestEpochStartsAtOpen: reopening a log reports where its batches' partitionLeaderEpoch rose,
// across segments, from the headers recovery reads anyway; a truncation cuts them.
func TestEpochStartsAtOpen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 300 // a few batches per segment
	l, _ := mustOpen(t, dir, cfg)
	if got := l.EpochStartsAtOpen(); len(got) != 0 {
		t.Fatalf("a new log reports %v", got)
	}
	var want []EpochStart
	for i, epoch := range []int32{2, 2, 5, 5, 5, 7, 7} {
		info, err := l.Append(batch(2, 40, fmt.Sprint(i), 1), true, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(want); n == 0 || want[n-1].Epoch < epoch {
			want = append(want, EpochStart{Epoch: epoch, StartOffset: info.FirstOffset})
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir, ".log")); n < 2 {
		t.Fatalf("%d segments; the test wants several", n)
	}
	l, _ = mustOpen(t, dir, cfg)
	defer l.Close()
	if got := l.EpochStartsAtOpen(); !slices.Equal(got, want) {
		t.Fatalf("EpochStartsAtOpen %v, want %v", got, want)
	}
	// A truncation drops the rises of the batches it removes.
	last := want[len(want)-1]
	if err := l.TruncateTo(last.StartOffset); err != nil {
		t.Fatal(err)
	}
	if got := l.EpochStartsAtOpen(); !slices.Equal(got, want[:len(want)-1]) {
		t.Fatalf("after TruncateTo(%d): %v, want %v", last.StartOffset, got, want[:len(want)-1])
	}
}
