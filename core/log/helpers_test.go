package log

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/isrbench/isrbench/core/records"
)

// batch builds one uncompressed batch of n records whose values are tag-0, tag-1, ... padded
// to valueSize bytes, with baseOffset 0 (leader appends assign offsets) and timestamp ts.
func batch(n, valueSize int, tag string, ts int64) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		v := []byte(fmt.Sprintf("%s-%d", tag, i))
		if len(v) < valueSize {
			v = append(v, make([]byte, valueSize-len(v))...)
		}
		recs[i] = records.Record{Key: []byte(tag), Value: v}
	}
	return records.AppendBatch(nil, 0, -1, ts, recs)
}

// batchAt builds a batch with a given baseOffset (follower appends).
func batchAt(base int64, n, valueSize int, tag string) []byte {
	b := batch(n, valueSize, tag, 1000)
	records.SetBaseOffset(b, base)
	return b
}

func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	return c
}

func mustOpen(t testing.TB, dir string, cfg Config) (*Log, Recovery) {
	t.Helper()
	l, rec, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l, rec
}

func mustAppend(t testing.TB, l *Log, blob []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(blob, true, 1)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return info
}

type logRec struct {
	off   int64
	key   string
	value string
}

// allRecords reads [LogStart, LEO) through Bytes and decodes every record.
func allRecords(t testing.TB, l *Log) []logRec {
	t.Helper()
	b, err := l.Bytes(l.LogStart(), l.LEO())
	if err != nil {
		t.Fatalf("Bytes: %v", err)
	}
	var out []logRec
	err = records.Split(b, func(batch []byte, h records.Header) error {
		return records.ForEachRecord(batch, func(off, _ int64, k, v []byte) error {
			out = append(out, logRec{off, string(k), trimZero(v)})
			return nil
		})
	})
	if err != nil {
		t.Fatalf("decode log bytes: %v", err)
	}
	return out
}

func trimZero(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// checkContiguous asserts records cover [from, to) without gap or duplicate.
func checkContiguous(t testing.TB, rs []logRec, from, to int64) {
	t.Helper()
	if int64(len(rs)) != to-from {
		t.Fatalf("%d records, want %d ([%d, %d))", len(rs), to-from, from, to)
	}
	for i, r := range rs {
		if r.off != from+int64(i) {
			t.Fatalf("record %d has offset %d, want %d", i, r.off, from+int64(i))
		}
	}
}

func segFiles(t testing.TB, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failingWriter fails every WriteAt after the first okWrites, optionally writing half of the
// bytes first (a torn write), and fails Fsync when failSync is set. It counts calls.
type failingWriter struct {
	okWrites int64
	torn     bool
	failSync atomic.Bool
	writes   atomic.Int64
	syncs    atomic.Int64
}

var errInjected = errors.New("injected I/O error")

func (w *failingWriter) Name() string { return "failing" }

func (w *failingWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	if w.writes.Add(1) <= w.okWrites {
		return PwritevWriter{}.WriteAt(f, off, bufs)
	}
	if w.torn {
		var all []byte
		for _, b := range bufs {
			all = append(all, b...)
		}
		f.WriteAt(all[:len(all)/2], off)
	}
	return errInjected
}

func (w *failingWriter) Fsync(f *os.File) error {
	w.syncs.Add(1)
	if w.failSync.Load() {
		return errInjected
	}
	return f.Sync()
}

// countingWriter counts WriteAt calls and fsyncs.
type countingWriter struct {
	writes atomic.Int64
	syncs  atomic.Int64
}

func (w *countingWriter) Name() string { return "counting" }
func (w *countingWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	w.writes.Add(1)
	return PwritevWriter{}.WriteAt(f, off, bufs)
}
func (w *countingWriter) Fsync(f *os.File) error {
	w.syncs.Add(1)
	return f.Sync()
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// BatchBoundaryAtOrBelow returns the base offset of the batch containing offset, or the LEO
// when offset >= LEO. offset < LogStart is an error wrapping kerr.OffsetOutOfRange.
func (l *Log) BatchBoundaryAtOrBelow(offset int64) (int64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.boundaryLocked(offset, l.leo.Load())
}
