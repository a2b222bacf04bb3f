package log

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"
)

// residentPages returns how many of path's pages are in the page cache, and its pages.
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	pg := int64(os.Getpagesize())
	pages = int((st.Size() + pg - 1) / pg)
	return residentBelow(t, path, int64(pages)*pg), pages
}

// A sealed segment is dropped from the page cache after its roll flush, with drop-behind on;
// with it off every page written stays cached. Either way every record reads back.
func TestDropBehindSealedSegments(t *testing.T) {
	for _, drop := range []int64{0, 128 << 10} {
		t.Run(fmt.Sprintf("drop=%d", drop), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 256 << 10
			cfg.DropBehindBytes = drop
			l, _ := mustOpen(t, dir, cfg)
			defer l.Close()
			var n int64
			for i := 0; i < 160; i++ { // about 4 segments of 8 KiB batches
				n += mustAppend(t, l, batch(8, 1000, fmt.Sprint("r", i), 1000)).Records
			}
			logs := segFiles(t, dir, ".log")
			if len(logs) < 3 {
				t.Fatalf("%d segments, want at least 3", len(logs))
			}
			var res, pages int
			for _, p := range logs[:len(logs)-1] { // the sealed ones
				r, n := residentPages(t, p)
				res, pages = res+r, pages+n
			}
			if drop == 0 && res != pages {
				t.Errorf("drop-behind off: %d of the sealed segments' %d pages cached, want all", res, pages)
			}
			if drop > 0 && res != 0 {
				t.Errorf("drop-behind %d: %d of the sealed segments' %d pages still cached after their roll flush, want 0", drop, res, pages)
			}
			checkContiguous(t, allRecords(t, l), 0, n)
		})
	}
}

// In the active segment a step is taken every half DropBehindBytes: what was appended since
// the last step is handed to the disk and what the previous step handed over is dropped.
// Truncation below both marks is followed, and every record reads back.
func TestDropBehindActiveSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.DropBehindBytes = 256 << 10
	l, _ := mustOpen(t, dir, cfg)
	defer l.Close()
	step := l.dropStep()
	if step != 128<<10 {
		t.Fatalf("step %d, want %d", step, 128<<10)
	}
	marks := func() (size, wb, dropped int64) {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		s := l.mu.segs[len(l.mu.segs)-1]
		return s.size, s.wbStarted, s.dropped
	}
	var n int64
	for i := 0; i < 256; i++ { // about 2 MiB
		n += mustAppend(t, l, batch(8, 1000, fmt.Sprint("a", i), 1000)).Records
	}
	size, wb, dropped := marks()
	if size-wb >= step || wb-dropped < step || dropped < size-3*step {
		t.Fatalf("size %d, handed to disk up to %d, dropped up to %d: want size-%d < handed, handed-dropped >= %d", size, wb, dropped, step, step)
	}
	checkContiguous(t, allRecords(t, l), 0, n)

	// Cut below both marks, then append: the next step starts from the cut.
	if err := l.TruncateTo(16); err != nil {
		t.Fatal(err)
	}
	cut := l.LEO()
	for i := 0; i < 64; i++ {
		mustAppend(t, l, batch(8, 1000, fmt.Sprint("b", i), 1000))
	}
	size, wb, dropped = marks()
	if wb > size || dropped > wb || size-wb >= step {
		t.Fatalf("after truncation: size %d, handed to disk up to %d, dropped up to %d", size, wb, dropped)
	}
	checkContiguous(t, allRecords(t, l), 0, l.LEO())
	if l.LEO() != cut+64*8 {
		t.Fatalf("LEO %d, want %d", l.LEO(), cut+64*8)
	}
}

func TestDropBehindConfig(t *testing.T) {
	cfg := testConfig()
	cfg.DropBehindBytes = -1
	_, _, err := Open(t.TempDir(), cfg)
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "isrbench.log.drop.behind.bytes") {
		t.Fatalf("Open with DropBehindBytes -1: %v, want a config error naming isrbench.log.drop.behind.bytes", err)
	}
}

// With isrbench.log.drop.behind.wait (the default) and Config.RollFlush set, as in a broker,
// the drop-behind steps of many Logs appended to at once go to the drop-behind goroutine, not
// to RollFlush's flushers, and their writebacks run one at a time; every range a step handed
// over is clean when the next step drops it, so the pages below the drop mark leave the page
// cache (but for the page a step boundary cuts, which fadvise keeps). Off, the steps go to
// RollFlush.
func TestDropBehindWaitOneAtATime(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			dropOverlapped.Store(false)
			var toFlushers atomic.Int64
			cfg := testConfig()
			cfg.SegmentBytes = 64 << 20
			cfg.DropBehindBytes = 256 << 10
			cfg.DropBehindWait = wait
			var flushed sync.WaitGroup
			cfg.RollFlush = func(job func()) {
				toFlushers.Add(1)
				flushed.Add(1)
				go func() { defer flushed.Done(); job() }()
			}
			const logs, appends = 6, 64 // about 512 KiB a round: up to 4 steps
			ls := make([]*Log, logs)
			dirs := make([]string, logs)
			for i := range ls {
				dirs[i] = t.TempDir()
				ls[i], _ = mustOpen(t, dirs[i], cfg)
			}
			// Three rounds of appends to every Log at once, each followed by the steps it
			// queued: the drop-behind goroutine runs its queue in order, and the flushers'
			// jobs are counted. Every round crosses a step, so the third drops what the
			// second handed over.
			for round := 0; round < 3; round++ {
				var wg sync.WaitGroup
				for i, l := range ls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := 0; j < appends; j++ {
							if _, err := l.Append(batch(8, 1000, fmt.Sprint("l", i, "-", round, "-", j), 1000), true, 0); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				flushed.Wait()
				if wait {
					done := make(chan struct{})
					if !dropQueue.Offer(func() { close(done) }) {
						t.Fatal("the drop-behind goroutine's queue is full")
					}
					<-done
				}
			}
			if wait {
				if n := toFlushers.Load(); n != 0 {
					t.Errorf("%d drop-behind steps went to RollFlush, want 0: they run on the drop-behind goroutine", n)
				}
				if dropOverlapped.Load() {
					t.Error("two drop-behind writebacks were under way at once")
				}
			} else if toFlushers.Load() == 0 {
				t.Error("no drop-behind step went to RollFlush with isrbench.log.drop.behind.wait off")
			}
			for i, l := range ls {
				l.wmu.Lock()
				s := l.mu.segs[len(l.mu.segs)-1]
				dropped, step := s.dropped, l.dropStep()
				l.wmu.Unlock()
				// A step takes what was appended since the last one, so behind appends the
				// steps grow and there are fewer of them.
				if dropped == 0 {
					t.Fatalf("log %d: nothing dropped", i)
				}
				if !wait {
					continue
				}
				res := residentBelow(t, segFiles(t, dirs[i], ".log")[0], dropped)
				if steps := int(dropped/step) + 1; res > steps {
					t.Errorf("log %d: %d pages below the drop mark %d still cached, want at most %d (one per step boundary)", i, res, dropped, steps)
				}
			}
			for _, l := range ls {
				checkContiguous(t, allRecords(t, l), 0, l.LEO())
				l.Close()
			}
		})
	}
}

// residentBelow returns how many of path's whole pages below off are in the page cache.
func residentBelow(t *testing.T, path string, off int64) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := int(off / int64(os.Getpagesize()))
	if n == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n*os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, n)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	res := 0
	for _, v := range vec {
		res += int(v & 1)
	}
	return res
}
