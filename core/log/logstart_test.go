package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestIncrementLogStart: a follower's log start follows its leader's (Kafka's
// maybeIncrementLogStartOffset). The log start may land inside a segment: reads below it are
// out of range, the whole segments below it are deleted at once, and it survives a reopen
// (LogStartFile) until retention, a truncation below it or a full truncation moves it to a
// segment boundary again.
func TestIncrementLogStart(t *testing.T) {
	// 10 segments of 4 one-record batches: segment i holds offsets [4i, 4i+4).
	setup := func(t *testing.T) (*Log, string) {
		dir := t.TempDir()
		l, _ := mustOpen(t, dir, testConfig())
		for i := 0; i < 40; i++ {
			mustAppend(t, l, batch(1, 900, "s", int64(1000*(i/4))))
		}
		if l.Segments() != 10 {
			t.Fatalf("want 10 segments, got %d", l.Segments())
		}
		return l, dir
	}
	ckptFile := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, LogStartFile))
		return err == nil
	}
	t.Run("inside a segment, kept across a reopen", func(t *testing.T) {
		l, dir := setup(t)
		n, err := l.IncrementLogStart(10)
		if err != nil || n != 2 || l.LogStart() != 10 || l.Segments() != 8 {
			t.Fatalf("IncrementLogStart(10): deleted %d, %v, start %d, %d segments; want 2 deleted, start 10, 8 segments", n, err, l.LogStart(), l.Segments())
		}
		if _, err := l.Read(9, 40, 1<<20, true); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("read at 9 below the log start 10: %v", err)
		}
		if _, err := l.Bytes(8, 40); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("bytes from 8 below the log start 10: %v", err)
		}
		s, err := l.Read(10, 40, 1<<20, true)
		if err != nil || s.FirstOffset != 10 {
			t.Fatalf("read at the log start 10: first %d, %v", s.FirstOffset, err)
		}
		s.Release()
		checkContiguous(t, allRecords(t, l), 10, 40)
		if n, err := l.IncrementLogStart(7); n != 0 || err != nil || l.LogStart() != 10 {
			t.Fatalf("a lower log start: deleted %d, %v, start %d; want no change", n, err, l.LogStart())
		}
		if _, err := l.IncrementLogStart(41); !errors.Is(err, kerr.OffsetOutOfRange) || l.LogStart() != 10 {
			t.Fatalf("a log start past the LEO: %v, start %d; want OFFSET_OUT_OF_RANGE and no change", err, l.LogStart())
		}
		if !ckptFile(dir) {
			t.Fatal("no log-start checkpoint for a log start inside a segment")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, _ := mustOpen(t, dir, testConfig())
		defer l2.Close()
		if l2.LogStart() != 10 || l2.LEO() != 40 {
			t.Fatalf("reopened: log start %d LEO %d, want 10 and 40", l2.LogStart(), l2.LEO())
		}
		// Retention deletes the segment holding it: the log start is a segment base again
		// and the checkpoint goes.
		l2.cfg.RetentionBytes = l2.Size() - l2.Size()/8 // one segment too many
		if n, err := l2.ApplyRetention(0, 40); err != nil || n != 1 || l2.LogStart() != 12 {
			t.Fatalf("retention: deleted %d, %v, start %d; want 1 deleted, start 12", n, err, l2.LogStart())
		}
		if ckptFile(dir) {
			t.Fatal("log-start checkpoint left once the log start is a segment base")
		}
	})
	t.Run("at a segment base and at the LEO", func(t *testing.T) {
		l, dir := setup(t)
		defer l.Close()
		if n, err := l.IncrementLogStart(8); err != nil || n != 2 || l.LogStart() != 8 || ckptFile(dir) {
			t.Fatalf("IncrementLogStart(8): deleted %d, %v, start %d, checkpoint %v", n, err, l.LogStart(), ckptFile(dir))
		}
		if n, err := l.IncrementLogStart(40); err != nil || n != 7 || l.LogStart() != 40 || l.Segments() != 1 {
			t.Fatalf("IncrementLogStart(LEO 40): deleted %d, %v, start %d, %d segments; want the active segment kept", n, err, l.LogStart(), l.Segments())
		}
		if s, err := l.Read(40, 40, 1<<20, true); err != nil || s.Size != 0 {
			t.Fatalf("read at the log start = LEO: size %d, %v", s.Size, err)
		}
	})
	t.Run("truncation below it", func(t *testing.T) {
		l, dir := setup(t)
		defer l.Close()
		if _, err := l.IncrementLogStart(10); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(9); err != nil || l.LEO() != 9 || l.LogStart() != 9 {
			t.Fatalf("TruncateTo(9) below the log start 10: LEO %d start %d, %v; want both 9", l.LEO(), l.LogStart(), err)
		}
		if err := l.TruncateTo(3); err != nil || l.LEO() != 3 || l.LogStart() != 3 || ckptFile(dir) {
			t.Fatalf("TruncateTo(3) below the first segment: LEO %d start %d checkpoint %v, %v", l.LEO(), l.LogStart(), ckptFile(dir), err)
		}
	})
	t.Run("checkpoint past the LEO at open", func(t *testing.T) {
		l, dir := setup(t)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := WriteCheckpoint(nil, filepath.Join(dir, LogStartFile), 0, []string{"55"}); err != nil {
			t.Fatal(err)
		}
		l2, rec := mustOpen(t, dir, testConfig())
		defer l2.Close()
		if l2.LogStart() != 55 || l2.LEO() != 55 || rec.Reason == "" {
			t.Fatalf("a log start 55 past the LEO 40: start %d LEO %d (%v); want an empty log at 55, reported", l2.LogStart(), l2.LEO(), rec)
		}
		if ckptFile(dir) {
			t.Fatal("log-start checkpoint left after the log restarted at it")
		}
	})
}
