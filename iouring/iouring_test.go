package iouring

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAvailableReport(t *testing.T) {
	ok, reason := Available()
	t.Logf("io_uring available=%v: %s", ok, reason)
	if reason == "" {
		t.Fatal("Available returned an empty reason")
	}
	ok2, reason2 := Available()
	if ok2 != ok || reason2 != reason {
		t.Fatalf("Available not stable: (%v,%q) then (%v,%q)", ok, reason, ok2, reason2)
	}
}

func TestExplainSetupErrno(t *testing.T) {
	for _, e := range []unix.Errno{unix.ENOSYS, unix.EPERM, unix.ENOMEM, unix.EINVAL, unix.EMFILE, unix.EIO} {
		err := &SetupError{Errno: e, Reason: explainSetupErrno(e)}
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, e) {
			t.Errorf("%v: SetupError does not wrap ErrUnavailable and the errno", e)
		}
		if err.Reason == "" {
			t.Errorf("%v: empty reason", e)
		}
	}
}

func newTestWriter(t testing.TB, entries int) *Writer {
	t.Helper()
	if ok, reason := Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	w, err := NewWriter(entries)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func tempFile(t testing.TB) *os.File {
	t.Helper()
	dir := t.TempDir()
	if d := os.Getenv("IOURING_BENCH_DIR"); d != "" {
		if _, ok := t.(*testing.B); ok {
			dir = d // e.g. /dev/shm to compare filesystems
		}
	}
	f, err := os.CreateTemp(dir, "seg-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	return f
}

// pattern returns n bytes that identify (writer, buffer index).
func pattern(id, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id*31 + i*7 + i>>8)
	}
	return b
}

func TestWriteAtConcurrent(t *testing.T) {
	w := newTestWriter(t, 8) // small ring: callers outnumber slots and must queue
	f := tempFile(t)
	const goroutines, perG = 8, 40
	sizes := []int{1, 100, 1024, 5000}
	// Each call writes 1..3 buffers; offsets are laid out in advance so every call owns a range.
	type call struct {
		off  int64
		bufs [][]byte
	}
	calls := make([][]call, goroutines)
	var want []byte
	id := 0
	for g := range goroutines {
		for i := range perG {
			var c call
			c.off = int64(len(want))
			for k := 0; k <= (g+i)%3; k++ {
				b := pattern(id, sizes[(id+k)%len(sizes)])
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
			// Write in reverse order within a goroutine so file growth is not sequential.
			for i := len(calls[g]) - 1; i >= 0; i-- {
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
		t.Fatalf("file content mismatch: got %d bytes, want %d (first diff at %d)", len(got), len(want), firstDiff(got, want))
	}
	st := w.Stats()
	t.Logf("stats: %+v (SQEs per enter %.2f)", st, float64(st.SQEs)/float64(st.Enters))
	if st.Requests != goroutines*perG || st.SQEs < st.Requests {
		t.Fatalf("stats %+v: want Requests=%d and SQEs >= Requests", st, goroutines*perG)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestGroupSubmission holds the submitter before its io_uring_enter until
// other callers queued, then checks they went to the kernel in one enter.
func TestGroupSubmission(t *testing.T) {
	w := newTestWriter(t, 16)
	f := tempFile(t)
	const others = 6
	queued := make(chan int, 64)
	release := make(chan struct{})
	var once sync.Once
	w.hooks.enqueued = func(n int) { queued <- n }
	w.hooks.beforeEnter = func() { once.Do(func() { <-release }) }

	var wg sync.WaitGroup
	errs := make(chan error, others+1)
	write := func(i int) {
		defer wg.Done()
		if err := w.WriteAt(f, int64(i)*100, [][]byte{pattern(i, 100)}); err != nil {
			errs <- err
		}
	}
	wg.Add(1)
	go write(0)
	deadline := time.After(10 * time.Second)
	waitQueued := func(want int) {
		for {
			select {
			case n := <-queued:
				if n == want {
					return
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %d pending requests", want)
			}
		}
	}
	waitQueued(1) // first caller enqueued; it becomes submitter and blocks in beforeEnter
	for i := 1; i <= others; i++ {
		wg.Add(1)
		go write(i)
	}
	waitQueued(others) // all others are pending behind the blocked submitter
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
		if !bytes.Equal(got[i*100:(i+1)*100], pattern(i, 100)) {
			t.Fatalf("range of caller %d corrupted", i)
		}
	}
}

// TestShortWrites makes every WRITEV completion report fewer bytes than the
// kernel wrote (as a short write would); the writer must resubmit the rest.
func TestShortWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short func(res int32, chunk int) int32
		sizes []int
	}{
		{"half", func(res int32, _ int) int32 { return max(res/2, 1) }, []int{10, 3000, 1, 4096}},
		{"one-byte", func(res int32, _ int) int32 { return 1 }, []int{3, 2, 5}},
		{"just-short", func(res int32, _ int) int32 { return max(res-1, 1) }, []int{100, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTestWriter(t, 4)
			f := tempFile(t)
			w.hooks.cqeRes = tc.short
			var bufs [][]byte
			var want []byte
			for i, n := range tc.sizes {
				b := pattern(i, n)
				bufs = append(bufs, b)
				want = append(want, b...)
			}
			const off = 7
			if err := w.WriteAt(f, off, bufs); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got[off:], want) || len(got) != off+len(want) {
				t.Fatalf("content mismatch after short writes (len %d, want %d)", len(got), off+len(want))
			}
			if st := w.Stats(); st.Resubmits == 0 {
				t.Fatalf("no resubmission counted: %+v", st)
			}
		})
	}
}

// TestManyIovecs writes more buffers than IOV_MAX in one call.
func TestManyIovecs(t *testing.T) {
	w := newTestWriter(t, 4)
	f := tempFile(t)
	var bufs [][]byte
	var want []byte
	for i := range iovMax*2 + 17 {
		b := pattern(i, 1+i%13)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	bufs = append(bufs, nil, []byte{}) // empty buffers are skipped
	if err := w.WriteAt(f, 0, bufs); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, want) {
		t.Fatalf("content mismatch: len %d want %d, first diff %d", len(got), len(want), firstDiff(got, want))
	}
	if st := w.Stats(); st.SQEs != 3 {
		t.Fatalf("SQEs = %d, want 3 (IOV_MAX-sized chunks)", st.SQEs)
	}
}

func TestAdvance(t *testing.T) {
	a, b, c := []byte("abc"), []byte("defgh"), []byte("ij")
	mk := func() []unix.Iovec {
		var v []unix.Iovec
		for _, s := range [][]byte{a, b, c} {
			x := unix.Iovec{Base: &s[0]}
			x.SetLen(len(s))
			v = append(v, x)
		}
		return v
	}
	str := func(v []unix.Iovec) string {
		var s string
		for _, x := range v {
			s += string(unsafe.Slice(x.Base, x.Len)) + "|"
		}
		return s
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "abc|defgh|ij|"}, {1, "bc|defgh|ij|"}, {3, "defgh|ij|"}, {4, "efgh|ij|"},
		{8, "ij|"}, {9, "j|"}, {10, ""},
	} {
		if got := str(AdvanceIovecs(mk(), tc.n)); got != tc.want {
			t.Errorf("AdvanceIovecs(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	w := newTestWriter(t, 4)
	f := tempFile(t)
	if err := w.WriteAt(f, -1, [][]byte{{1}}); err == nil {
		t.Error("negative offset accepted")
	}
	if err := w.WriteAt(nil, 0, [][]byte{{1}}); err == nil {
		t.Error("nil file accepted")
	}
	// Read-only file: the kernel's EBADF comes back as the write's error.
	ro, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := w.WriteAt(ro, 0, [][]byte{[]byte("x")}); !errors.Is(err, unix.EBADF) {
		t.Errorf("write to read-only file: err = %v, want EBADF", err)
	}
	closedF := tempFile(t)
	closedF.Close()
	if err := w.WriteAt(closedF, 0, [][]byte{[]byte("x")}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write to closed file: err = %v, want os.ErrClosed", err)
	}
	// The writer still works after per-request errors.
	if err := w.WriteAt(f, 0, [][]byte{[]byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Fsync(f); err != nil {
		t.Fatalf("Fsync: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, fn := range map[string]func() error{
		"WriteAt":       func() error { return w.WriteAt(f, 0, [][]byte{[]byte("x")}) },
		"WriteAt-empty": func() error { return w.WriteAt(f, 0, nil) },
		"Fsync":         func() error { return w.Fsync(f) },
	} {
		if err := fn(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

// TestCloseWaitsForInFlight closes the writer while callers are writing: each
// call either succeeds (and its bytes are in the file) or fails with ErrClosed.
func TestCloseWaitsForInFlight(t *testing.T) {
	w := newTestWriter(t, 4)
	f := tempFile(t)
	const n = 32
	started := make(chan struct{}, n)
	results := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			results[i] = w.WriteAt(f, int64(i)*64, [][]byte{pattern(i, 64)})
		}()
	}
	for range n / 2 {
		<-started
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	got, _ := os.ReadFile(f.Name())
	for i, err := range results {
		switch {
		case err == nil:
			if len(got) < (i+1)*64 || !bytes.Equal(got[i*64:(i+1)*64], pattern(i, 64)) {
				t.Errorf("call %d succeeded but its bytes are missing", i)
			}
		case !errors.Is(err, ErrClosed):
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func BenchmarkWriteAt(b *testing.B) {
	const span = 16 << 20 // offsets wrap within 16 MiB to keep the file small
	for _, size := range []int{1 << 10, 16 << 10} {
		buf := pattern(1, size)
		for _, impl := range []string{"pwritev", "uring"} {
			b.Run(fmt.Sprintf("%s/%dKiB", impl, size>>10), func(b *testing.B) {
				f := tempFile(b)
				var write func(off int64) error
				var w *Writer
				switch impl {
				case "pwritev":
					fd := int(f.Fd())
					write = func(off int64) error {
						n, err := unix.Pwritev(fd, [][]byte{buf}, off)
						if err == nil && n != len(buf) {
							err = io.ErrShortWrite
						}
						return err
					}
				case "uring":
					w = newTestWriter(b, 0)
					write = func(off int64) error { return w.WriteAt(f, off, [][]byte{buf}) }
				}
				b.Run("serial", func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(size))
					var off int64
					for b.Loop() {
						if err := write(off); err != nil {
							b.Fatal(err)
						}
						off = (off + int64(size)) % span
					}
				})
				// parallel-G: G goroutines per P (GOMAXPROCS*G writers), like many
				// concurrent produce requests appending to different partitions.
				for _, g := range []int{1, 8} {
					b.Run(fmt.Sprintf("parallel-%d", g), func(b *testing.B) {
						b.ReportAllocs()
						b.SetBytes(int64(size))
						b.SetParallelism(g)
						var st0 Stats
						if w != nil {
							st0 = w.Stats()
						}
						var mu sync.Mutex
						var next int64
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								mu.Lock()
								off := next
								next = (next + int64(size)) % span
								mu.Unlock()
								if err := write(off); err != nil {
									b.Error(err)
									return
								}
							}
						})
						if w != nil {
							st := w.Stats()
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
