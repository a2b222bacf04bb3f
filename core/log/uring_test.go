package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/iouring"
)

func newTestUring(t testing.TB, entries int) *UringWriter {
	t.Helper()
	if ok, reason := iouring.Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	w, err := newUringWriter(entries)
	if err != nil {
		t.Fatalf("newUringWriter: %v", err)
	}
	t.Cleanup(func() { w.close() })
	return w
}

func tempSegment(t testing.TB) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fill returns n bytes that identify (caller, buffer index).
func fill(id, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id*31 + i*7 + i>>8)
	}
	return b
}

// TestUringWriterConcurrent: many goroutines write their own ranges of one file through a
// small ring (callers outnumber its slots): every byte lands, each call is one op.
func TestUringWriterConcurrent(t *testing.T) {
	w := newTestUring(t, 8)
	f := tempSegment(t)
	const goroutines, perG = 8, 40
	sizes := []int{1, 100, 1024, 5000}
	type call struct {
		off  int64
		bufs [][]byte
	}
	calls := make([][]call, goroutines)
	var want []byte
	id := 0
	for g := range goroutines {
		for i := range perG {
			c := call{off: int64(len(want))}
			for k := 0; k <= (g+i)%3; k++ {
				b := fill(id, sizes[(id+k)%len(sizes)])
				id++
				c.bufs = append(c.bufs, b)
				want = append(want, b...)
			}
			calls[g] = append(calls[g], c)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := len(calls[g]) - 1; i >= 0; i-- { // file growth is not sequential
				if err := w.WriteAt(f, calls[g][i].off, calls[g][i].bufs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file content mismatch: got %d bytes, want %d", len(got), len(want))
	}
	st := w.Stats()
	t.Logf("stats: %+v (SQEs per enter %.2f)", st, float64(st.SQEs)/float64(st.Enters))
	if st.Requests != goroutines*perG || st.SQEs < st.Requests {
		t.Fatalf("stats %+v: want Requests=%d and SQEs >= Requests", st, goroutines*perG)
	}
}

// TestUringGroupSubmission holds the committer before its Submit until other callers
// queued, then checks they went to the kernel in one io_uring_enter.
func TestUringGroupSubmission(t *testing.T) {
	w := newTestUring(t, 16)
	f := tempSegment(t)
	const others = 6
	queued := make(chan struct{}, 64)
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	w.c.onQueued = func() { queued <- struct{}{} }
	w.beforeBatch = func(int) { once.Do(func() { close(started); <-release }) }

	var wg sync.WaitGroup
	errs := make(chan error, others+1)
	write := func(i int) {
		defer wg.Done()
		if err := w.WriteAt(f, int64(i)*100, [][]byte{fill(i, 100)}); err != nil {
			errs <- err
		}
	}
	wg.Add(1)
	go write(0)
	deadline := time.After(10 * time.Second)
	select {
	case <-started: // the first caller is the committer, held before its Submit
	case <-deadline:
		t.Fatal("the first write never reached the committer")
	}
	for i := 1; i <= others; i++ {
		wg.Add(1)
		go write(i)
	}
	for i := 0; i < others; i++ {
		select {
		case <-queued:
		case <-deadline:
			t.Fatalf("only %d of %d writes queued", i, others)
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("stats: %+v", st)
	if st.MaxBatch < others {
		t.Fatalf("MaxBatch = %d, want >= %d: queued callers were not submitted in one io_uring_enter", st.MaxBatch, others)
	}
	got, _ := os.ReadFile(f.Name())
	for i := 0; i <= others; i++ {
		if !bytes.Equal(got[i*100:(i+1)*100], fill(i, 100)) {
			t.Fatalf("range of caller %d corrupted", i)
		}
	}
}

// TestUringWriterErrors: bad arguments, a read-only and a closed file fail with clear errors
// and the writer keeps working.
func TestUringWriterErrors(t *testing.T) {
	w := newTestUring(t, 4)
	f := tempSegment(t)
	if err := w.WriteAt(f, -1, [][]byte{{1}}); err == nil {
		t.Error("negative offset accepted")
	}
	if err := w.WriteAt(nil, 0, [][]byte{{1}}); err == nil {
		t.Error("nil file accepted")
	}
	ro, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := w.WriteAt(ro, 0, [][]byte{[]byte("x")}); !errors.Is(err, unix.EBADF) {
		t.Errorf("write to read-only file: err = %v, want EBADF", err)
	}
	closed := tempSegment(t)
	closed.Close()
	if err := w.WriteAt(closed, 0, [][]byte{[]byte("x")}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write to closed file: err = %v, want os.ErrClosed", err)
	}
	if err := w.WriteAt(f, 0, nil); err != nil {
		t.Errorf("empty write: %v", err)
	}
	if err := w.WriteAt(f, 0, [][]byte{[]byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Fsync(f); err != nil {
		t.Fatalf("Fsync: %v", err)
	}
	if got, _ := os.ReadFile(f.Name()); string(got) != "ok" {
		t.Fatalf("file holds %q", got)
	}
}

// BenchmarkWriteAt: one 1 KiB or 16 KiB WriteAt through each Writer, serially and from
// GOMAXPROCS*G goroutines (like concurrent produce requests appending to different
// partitions), with the uring writer's SQEs per io_uring_enter.
func BenchmarkWriteAt(b *testing.B) {
	const span = 16 << 20 // offsets wrap within 16 MiB to keep the file small
	for _, size := range []int{1 << 10, 16 << 10} {
		buf := fill(1, size)
		for _, impl := range []string{"pwritev", "uring"} {
			b.Run(fmt.Sprintf("%s/%dKiB", impl, size>>10), func(b *testing.B) {
				f := tempSegment(b)
				var w Writer = PwritevWriter{}
				var uw *UringWriter
				if impl == "uring" {
					uw = newTestUring(b, 0)
					w = uw
				}
				b.Run("serial", func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(size))
					var off int64
					bufs := [][]byte{buf}
					for b.Loop() {
						if err := w.WriteAt(f, off, bufs); err != nil {
							b.Fatal(err)
						}
						off = (off + int64(size)) % span
					}
				})
				for _, g := range []int{1, 8} {
					b.Run(fmt.Sprintf("parallel-%d", g), func(b *testing.B) {
						b.ReportAllocs()
						b.SetBytes(int64(size))
						b.SetParallelism(g)
						var st0 iouring.Stats
						if uw != nil {
							st0 = uw.Stats()
						}
						var mu sync.Mutex
						var next int64
						b.RunParallel(func(pb *testing.PB) {
							bufs := [][]byte{buf}
							for pb.Next() {
								mu.Lock()
								off := next
								next = (next + int64(size)) % span
								mu.Unlock()
								if err := w.WriteAt(f, off, bufs); err != nil {
									b.Error(err)
									return
								}
							}
						})
						if uw != nil {
							st := uw.Stats()
							if e := st.Enters - st0.Enters; e > 0 {
								b.ReportMetric(float64(st.SQEs-st0.SQEs)/float64(e), "SQEs/enter")
							}
						}
					})
				}
			})
		}
	}
}
