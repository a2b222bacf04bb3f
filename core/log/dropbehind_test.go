package log

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"
)

// residentPages returns how many of path's pages are in the page cache, and its pages.
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer unix.Munmap(m)
	pg := os.Getpagesize()
	vec := make([]byte, (len(m)+pg-1)/pg)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
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
