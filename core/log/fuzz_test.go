package log

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// blockingWriter blocks its first WriteAt until gate is closed and records each call's buffers.
type blockingWriter struct {
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	calls   [][][]byte
}

func (w *blockingWriter) Name() string { return "blocking" }
func (w *blockingWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	w.mu.Lock()
	first := len(w.calls) == 0
	w.calls = append(w.calls, append([][]byte(nil), bufs...))
	w.mu.Unlock()
	if first {
		close(w.entered)
		<-w.gate
	}
	return PwritevWriter{}.WriteAt(f, off, bufs)
}

// TestGroupCommit: appends that queue while a write is in flight are written together with
// one WriteAt by the next committer.
func TestGroupCommit(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), gate: make(chan struct{})}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.Writer = w
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	const waiters = 5
	queued := make(chan struct{}, waiters)
	l.gc.onQueued = func() { queued <- struct{}{} }
	var wg sync.WaitGroup
	wg.Add(1 + waiters)
	go func() { defer wg.Done(); mustAppend(t, l, batch(1, 10, "first", 1)) }()
	deadline := time.After(10 * time.Second)
	select {
	case <-w.entered:
	case <-deadline:
		t.Fatal("first write never started")
	}
	infos := make([]AppendInfo, waiters)
	for i := 0; i < waiters; i++ {
		go func(i int) { defer wg.Done(); infos[i] = mustAppend(t, l, batch(2, 10, "q", 1)) }(i)
	}
	for i := 0; i < waiters; i++ {
		select {
		case <-queued:
		case <-deadline:
			t.Fatalf("only %d appends queued", i)
		}
	}
	close(w.gate)
	wg.Wait()
	if len(w.calls) != 2 || len(w.calls[1]) != waiters {
		t.Fatalf("%d writes, the second with %d buffers; want 2 writes, the second with %d", len(w.calls), len(w.calls[len(w.calls)-1]), waiters)
	}
	if l.LEO() != 1+2*waiters {
		t.Fatalf("LEO %d", l.LEO())
	}
	seen := map[int64]bool{}
	for _, info := range infos {
		if info.LastOffset != info.FirstOffset+1 || seen[info.FirstOffset] {
			t.Fatalf("infos %+v", infos)
		}
		seen[info.FirstOffset] = true
	}
	checkContiguous(t, allRecords(t, l), 0, l.LEO())
}

// FuzzRecover: arbitrary bytes as a segment (and index) file never make Open fail or panic;
// the recovered log is a valid prefix of the file.
func FuzzRecover(f *testing.F) {
	var good []byte
	for i := int64(0); i < 4; i++ {
		b := batch(2, 30, "z", 1)
		records.SetBaseOffset(b, 2*i)
		good = append(good, b...)
	}
	f.Add(good, []byte{})
	f.Add(good[:len(good)-7], []byte{0, 0, 0, 2, 0, 0, 0, 100})
	f.Add(good[:30], []byte{1, 2, 3})
	f.Add([]byte{}, []byte{})
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 64
	// An in-memory file system: fsync is irrelevant to what is fuzzed here and costs ~20 ms
	// per input on a disk.
	f.Fuzz(func(t *testing.T, data, index []byte) {
		fs := vfs.NewMemFS(nil)
		dir := "/log"
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{segmentName(0, ".log"): data, segmentName(0, ".index"): index} {
			if err := vfs.WriteFileAtomic(fs, filepath.Join(dir, name), b); err != nil {
				t.Fatal(err)
			}
		}
		cfg := cfg
		cfg.FS = fs
		l, rec, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		b, err := l.Bytes(l.LogStart(), l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, b) || int64(len(b)) != l.Size() || int64(len(data)-len(b)) != rec.TruncatedBytes {
			t.Fatalf("recovered %d of %d bytes, size %d, %v", len(b), len(data), l.Size(), rec)
		}
		var next int64
		if err := records.Split(b, func(_ []byte, h records.Header) error {
			if h.BaseOffset != next {
				t.Fatalf("non-contiguous batch at %d", h.BaseOffset)
			}
			next = h.NextOffset()
			return nil
		}); err != nil {
			t.Fatalf("recovered bytes invalid: %v", err)
		}
		if next != l.LEO() {
			t.Fatalf("LEO %d, batches end at %d", l.LEO(), next)
		}
		if _, err := l.Append(batch(1, 5, "after", 1), true, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadLookup checks Read's offset/maxOffset/maxBytes/minOneBatch resolution (readLocked)
// on an in-memory layout (no files) against a linear model.
func FuzzReadLookup(f *testing.F) {
	f.Add([]byte{3, 1, 200, 4, 0, 7}, int64(5), int64(9), 300, true)
	f.Add([]byte{0}, int64(0), int64(1), 0, false)
	f.Fuzz(func(t *testing.T, layout []byte, off, maxOff int64, maxBytes int, minOne bool) {
		// Each byte: a batch of 1+b%4 offsets and 61+b bytes; a byte >= 250 starts a new segment.
		type batchInfo struct {
			seg, base, next, pos, size int64
		}
		var bs []batchInfo
		l := &Log{}
		cur := &segment{base: 0, next: 0, maxTs: -1}
		l.mu.segs = []*segment{cur}
		var leo int64
		for _, b := range layout {
			if b >= 250 && cur.size > 0 {
				cur = &segment{base: leo, next: leo, maxTs: -1}
				l.mu.segs = append(l.mu.segs, cur)
			}
			span, size := int64(1+b%4), int64(61+int(b))
			cur.entries = append(cur.entries, entry{rel: uint32(leo - cur.base), pos: uint32(cur.size)})
			bs = append(bs, batchInfo{int64(len(l.mu.segs) - 1), leo, leo + span, cur.size, size})
			cur.size += size
			leo += span
			cur.next = leo
		}
		l.leo.Store(leo)
		s, _, err := l.readLocked(off, maxOff, maxBytes, minOne)
		if off < 0 || off > leo {
			if err == nil {
				t.Fatalf("Read(%d) outside [0, %d] succeeded", off, leo)
			}
			return
		}
		if err != nil {
			t.Fatalf("Read(%d, %d, %d, %v): %v", off, maxOff, maxBytes, minOne, err)
		}
		// Model.
		var wantFirst, wantNext, wantSize int64 = off, off, 0
		mo := min(maxOff, leo)
		if off < mo {
			i := 0
			for bs[i].next <= off {
				i++
			}
			k := i
			for k < len(bs) && bs[k].seg == bs[i].seg && bs[k].next <= mo &&
				(bs[k].pos+bs[k].size-bs[i].pos <= int64(maxBytes) || (k == i && minOne)) {
				k++
			}
			if k > i {
				wantFirst, wantNext, wantSize = bs[i].base, bs[k-1].next, bs[k-1].pos+bs[k-1].size-bs[i].pos
			}
		}
		if s.FirstOffset != wantFirst || s.NextOffset != wantNext || s.Size != wantSize {
			t.Fatalf("Read(%d, %d, %d, %v) = [%d, %d) %d bytes, want [%d, %d) %d bytes", off, maxOff, maxBytes, minOne,
				s.FirstOffset, s.NextOffset, s.Size, wantFirst, wantNext, wantSize)
		}
		s.Release()
		if got, err := l.BatchBoundaryAtOrBelow(off); err != nil || (off < leo && got > off) || (off == leo && got != leo) {
			t.Fatalf("BatchBoundaryAtOrBelow(%d) = %d, %v", off, got, err)
		}
	})
}
