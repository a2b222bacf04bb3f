package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/core/vfs"
)

// fdFS wraps a file system, counts the files open through it, and fails every open (and the
// directory opens of ReadDir and SyncDir) with EMFILE while exhausted is set, as a process at
// its RLIMIT_NOFILE does.
type fdFS struct {
	vfs.FS
	exhausted atomic.Bool
	limit     atomic.Int64 // > 0: opens fail once this many succeeded (see opensLeft)
	open      atomic.Int64 // files open now
	peak      atomic.Int64
	opens     atomic.Int64 // successful opens so far
}

func newFdFS(base vfs.FS) *fdFS { return &fdFS{FS: vfs.Or(base)} }

func (f *fdFS) emfile(op, name string) error {
	if lim := f.limit.Load(); f.exhausted.Load() || (lim > 0 && f.opens.Load() >= lim) {
		return &os.PathError{Op: op, Path: name, Err: syscall.EMFILE}
	}
	return nil
}

func (f *fdFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := f.emfile("open", name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.opens.Add(1)
	n := f.open.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	return &fdFile{File: file, fs: f}, nil
}

func (f *fdFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := f.emfile("open", dir); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(dir)
}

func (f *fdFS) SyncDir(dir string) error {
	if err := f.emfile("open", dir); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

type fdFile struct {
	vfs.File
	fs     *fdFS
	closed atomic.Bool
}

func (f *fdFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// checkResourceError asserts that err is a resource error (too many open files) that
// neither wraps kerr.KafkaStorageError nor poisoned l.
func checkResourceError(t *testing.T, what string, l *Log, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s with no descriptor left succeeded", what)
	case !errors.Is(err, ErrTooManyOpenFiles) || !IsResourceError(err) || !errors.Is(err, syscall.EMFILE):
		t.Fatalf("%s: %v, want an error wrapping ErrTooManyOpenFiles and EMFILE", what, err)
	case errors.Is(err, kerr.KafkaStorageError):
		t.Fatalf("%s: %v wraps KAFKA_STORAGE_ERROR: the log directory would go offline", what, err)
	case !errors.Is(err, kerr.RequestTimedOut):
		t.Fatalf("%s: %v, want it to wrap REQUEST_TIMED_OUT (retriable)", what, err)
	case !strings.Contains(err.Error(), "ulimit -n"):
		t.Fatalf("%s: %q does not say what to do", what, err)
	}
	if l != nil {
		if perr := l.usable(); perr != nil {
			t.Fatalf("%s poisoned the log: %v", what, perr)
		}
	}
}

// TestResourceErrorsDoNotPoison: with no descriptor left (EMFILE from every open) each
// operation that needs one fails with a resource error, changes nothing, and works once
// descriptors are back; the Log is never poisoned.
func TestResourceErrorsDoNotPoison(t *testing.T) {
	fs := newFdFS(nil)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.FS = fs
	cfg.cache = newFileCache(2)
	l, _ := mustOpen(t, dir, cfg)
	defer l.Close()
	fill := func(segs int) {
		for l.Segments() < segs {
			mustAppend(t, l, batch(2, 300, "f", 1))
		}
	}
	fill(6)

	t.Run("roll", func(t *testing.T) {
		// Fill the active segment so that the next batch rolls.
		for {
			n := l.Segments()
			leo := l.LEO()
			fs.exhausted.Store(true)
			_, err := l.Append(batch(2, 300, "roll", 1), true, 0)
			fs.exhausted.Store(false)
			if err == nil {
				if l.Segments() != n {
					t.Fatalf("rolled with no descriptor left")
				}
				continue
			}
			checkResourceError(t, "append that rolls", l, err)
			if l.LEO() != leo || l.Segments() != n {
				t.Fatalf("failed roll changed the log: LEO %d -> %d, segments %d -> %d", leo, l.LEO(), n, l.Segments())
			}
			break
		}
		leo := l.LEO()
		info, err := l.Append(batch(2, 300, "after", 1), true, 0)
		if err != nil || info.FirstOffset != leo {
			t.Fatalf("append once descriptors are back: %+v %v (LEO was %d)", info, err, leo)
		}
		checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
	})

	t.Run("blob spanning two rolls", func(t *testing.T) {
		// The second segment the blob needs cannot be created: nothing of it is written and
		// the first one created for it is removed.
		var blob []byte
		for i := 0; i < 12; i++ {
			blob = append(blob, batch(1, 700, fmt.Sprint("span", i), 1)...)
		}
		leo, n := l.LEO(), l.Segments()
		before := listDir(t, dir)
		fs.opensLeft(1) // the first segment's .log (its .index is created when first written)
		_, err := l.Append(blob, true, 0)
		fs.restore()
		checkResourceError(t, "blob that rolls twice", l, err)
		if l.LEO() != leo || l.Segments() != n {
			t.Fatalf("LEO %d -> %d, segments %d -> %d", leo, l.LEO(), n, l.Segments())
		}
		if after := listDir(t, dir); after != before {
			t.Fatalf("files left by the failed roll:\nbefore %s\nafter  %s", before, after)
		}
		mustAppend(t, l, blob)
		checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
	})

	t.Run("read of a closed sealed segment", func(t *testing.T) {
		evictAll(l)
		fs.exhausted.Store(true)
		_, err := l.Read(l.LogStart(), l.LEO(), 1<<20, true)
		fs.exhausted.Store(false)
		checkResourceError(t, "read", l, err)
		s, err := l.Read(l.LogStart(), l.LEO(), 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	})

	t.Run("truncate into a closed sealed segment", func(t *testing.T) {
		evictAll(l)
		leo := l.LEO()
		to := l.LogStart() + 3
		fs.exhausted.Store(true)
		err := l.TruncateTo(to)
		fs.exhausted.Store(false)
		checkResourceError(t, "truncate", l, err)
		if l.LEO() != leo {
			t.Fatalf("failed truncation moved the LEO %d -> %d", leo, l.LEO())
		}
		if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		fill(4)
		checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
	})

	t.Run("flush", func(t *testing.T) {
		mustAppend(t, l, batch(1, 10, "unflushed", 1))
		fs.exhausted.Store(true)
		err := l.Flush()
		fs.exhausted.Store(false)
		checkResourceError(t, "flush", l, err)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("truncate fully", func(t *testing.T) {
		leo, start := l.LEO(), l.LogStart()
		fs.exhausted.Store(true)
		err := l.TruncateFullyAndStartAt(leo + 100)
		fs.exhausted.Store(false)
		checkResourceError(t, "truncate fully", l, err)
		if l.LEO() != leo || l.LogStart() != start {
			t.Fatalf("failed full truncation changed the log: [%d, %d) -> [%d, %d)", start, leo, l.LogStart(), l.LEO())
		}
		checkContiguous(t, allRecords(t, l), start, leo)
		if err := l.TruncateFullyAndStartAt(leo + 100); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, batch(1, 10, "restart", 1))
		if l.LogStart() != leo+100 || l.LEO() != leo+101 {
			t.Fatalf("after full truncation: [%d, %d)", l.LogStart(), l.LEO())
		}
	})

	t.Run("open", func(t *testing.T) {
		fs.exhausted.Store(true)
		_, _, err := Open(dir+"-other", cfg)
		fs.exhausted.Store(false)
		checkResourceError(t, "Open", nil, err)
	})
}

// opensLeft lets the next n opens succeed, then fails every later one with EMFILE until
// restore.
func (f *fdFS) opensLeft(n int64) { f.limit.Store(f.opens.Load() + n) }

// restore ends the exhaustion.
func (f *fdFS) restore() {
	f.exhausted.Store(false)
	f.limit.Store(0)
}

// listDir returns the names in dir, sorted, as one string.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// evictAll closes every sealed segment's file that no reader holds.
func evictAll(l *Log) {
	l.mu.RLock()
	segs := append([]*segment(nil), l.mu.segs...)
	l.mu.RUnlock()
	for _, s := range segs {
		if s.sealed.Load() {
			s.fmu.Lock()
			s.cache.remove(s)
			s.dropHoldLocked()
			s.fmu.Unlock()
		}
	}
}

// TestOpenFilesStayBounded: a log with many segments keeps O(1) files open (its active
// segment and what the cache of sealed files holds), however many segments it has and
// however its old segments are read; reads of old segments work, also after retention
// unlinked them under a live Slice and after a reopen.
func TestOpenFilesStayBounded(t *testing.T) {
	const cacheSize = 3
	fs := newFdFS(nil)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.FS = fs
	cfg.cache = newFileCache(cacheSize)
	bound := int64(1 + cacheSize) // the active segment and the cache
	l, _ := mustOpen(t, dir, cfg)
	for l.Segments() < 200 {
		mustAppend(t, l, batch(1+int(l.LEO()%3), 300, "b", 1))
	}
	if got := fs.open.Load(); got > bound || fs.peak.Load() > bound+2 {
		t.Fatalf("%d segments: %d files open (peak %d), want at most %d (+2 briefly: an index, a checkpoint)", l.Segments(), got, fs.peak.Load(), bound)
	}
	// Every offset readable, one Slice at a time, oldest first and newest first.
	leo := l.LEO()
	for _, order := range []string{"oldest first", "newest first"} {
		for i := int64(0); i < leo; i++ {
			off := i
			if order == "newest first" {
				off = leo - 1 - i
			}
			s, err := l.Read(off, leo, 1, true)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", order, off, err)
			}
			if _, err := s.ReadAll(nil); err != nil || s.FirstOffset > off || s.NextOffset <= off {
				t.Fatalf("%s: Read(%d) = [%d, %d): %v", order, off, s.FirstOffset, s.NextOffset, err)
			}
			s.Release()
			if got := fs.open.Load(); got > bound {
				t.Fatalf("%s: after reading offset %d: %d files open, want at most %d", order, off, got, bound)
			}
		}
	}
	// A Slice of the oldest segment outlives its eviction and retention's unlink.
	s, err := l.Read(0, leo, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	for off := leo / 2; off < leo; off += 10 { // push the oldest out of the cache
		r, err := l.Read(off, leo, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	cfg.RetentionBytes = 0
	if err := l.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(0, l.LEO()); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if _, err := os.Stat(s.File.Name()); !os.IsNotExist(err) {
		t.Fatalf("segment %s not unlinked: %v", s.File.Name(), err)
	}
	if b, err := s.ReadAll(nil); err != nil || len(b) == 0 {
		t.Fatalf("slice of an unlinked, evicted segment: %d bytes, %v", len(b), err)
	}
	s.Release()
	if _, err := l.Read(0, leo, 1, true); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read below the log start after retention: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fs.open.Load(); got != 0 {
		t.Fatalf("%d files open after Close", got)
	}
	// Reopen: recovery walks every segment one at a time.
	cfg.RetentionBytes = -1
	os.Remove(filepath.Join(dir, RecoveryPointFile)) // CRC-check everything
	l, rec := mustOpen(t, dir, cfg)
	defer l.Close()
	if fs.peak.Load() > bound+2 {
		t.Fatalf("recovery of %d segments: peak %d files open", rec.Segments, fs.peak.Load())
	}
	checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
}

// TestConcurrentReadsOfSealedSegments: readers of old segments race a cache of one file,
// appends, retention and truncation; every Slice they get stays readable until released.
func TestConcurrentReadsOfSealedSegments(t *testing.T) {
	cfg := testConfig()
	cfg.cache = newFileCache(1)
	cfg.RetentionBytes = 40 << 10
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for l.Segments() < 8 {
		mustAppend(t, l, batch(1, 200, "s", 1))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
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
				off := start + int64(i*13+r)%(leo-start)
				s, err := l.Read(off, leo, 4096, true)
				if errors.Is(err, kerr.OffsetOutOfRange) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				// A truncation cutting into a live Slice shortens it (see Slice); a
				// closed file would be a bug.
				if _, err := s.ReadAll(nil); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Error(err)
				}
				s.Release()
			}
		}(r)
	}
	for i := 0; i < 300; i++ {
		mustAppend(t, l, batch(1+i%3, 200, "c", 1))
		if i%25 == 24 {
			if err := l.TruncateTo(l.LEO() - 30); err != nil {
				t.Fatal(err)
			}
		}
		if i%40 == 39 {
			if _, err := l.ApplyRetention(0, l.LEO()); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	checkContiguous(t, allRecords(t, l), l.LogStart(), l.LEO())
}

// TestRealFileLimit runs TestFileLimitChild in a child process whose RLIMIT_NOFILE it lowers,
// so that the descriptors really run out (EMFILE from the kernel) without touching the
// limit of this process.
func TestRealFileLimit(t *testing.T) {
	if os.Getenv(fileLimitChildEnv) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileLimitChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fileLimitChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFileLimitChild") {
		t.Fatalf("child with a lowered file limit: %v\n%s", err, out)
	}
}

const fileLimitChildEnv = "ISRBENCH_LOG_FILE_LIMIT_CHILD"

// TestFileLimitChild (in the child process of TestRealFileLimit only): with every descriptor
// of a 64-file limit taken, the append that rolls fails with ErrTooManyOpenFiles, the log
// stays usable, and the roll succeeds once descriptors are free.
func TestFileLimitChild(t *testing.T) {
	if os.Getenv(fileLimitChildEnv) == "" {
		t.Skip("run by TestRealFileLimit in a child process")
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	l, _ := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	for l.Segments() < 3 {
		mustAppend(t, l, batch(2, 300, "a", 1))
	}
	var hog []*os.File
	defer func() {
		for _, f := range hog {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hog = append(hog, f)
	}
	segs := l.Segments()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = l.Append(batch(2, 300, "b", 1), true, 0)
	}
	checkResourceError(t, "append at the file limit", l, err)
	if l.Segments() != segs {
		t.Fatalf("segments %d -> %d with no descriptor left", segs, l.Segments())
	}
	for _, f := range hog {
		f.Close()
	}
	hog = nil
	mustAppend(t, l, batch(2, 300, "c", 1))
	if l.Segments() != segs+1 {
		t.Fatalf("no roll once descriptors are free: %d segments", l.Segments())
	}
	checkContiguous(t, allRecords(t, l), 0, l.LEO())
}
