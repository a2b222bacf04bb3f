package iouring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
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

func newTestRing(t testing.TB, entries int) *Ring {
	t.Helper()
	if ok, reason := Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	g, err := NewRing(entries)
	if err != nil {
		t.Fatalf("NewRing: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// writeAt submits one write of bufs at off to f and returns its error.
func writeAt(g *Ring, f *os.File, off int64, bufs [][]byte) error {
	op := &Op{Fd: int(f.Fd()), Off: off, Bufs: bufs}
	if err := g.Submit([]*Op{op}); err != nil {
		return err
	}
	return op.Err
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

// TestSubmitBatch submits more writes than the ring has entries in one Submit, in batches
// of every size, out of file order: every op completes and the file holds every byte.
func TestSubmitBatch(t *testing.T) {
	g := newTestRing(t, 8) // small ring: a Submit of more ops refills the SQ as ops complete
	f := tempFile(t)
	sizes := []int{1, 100, 1024, 5000}
	var ops []*Op
	var want []byte
	id := 0
	for i := range 320 {
		op := &Op{Fd: int(f.Fd()), Off: int64(len(want))}
		for k := 0; k <= i%3; k++ {
			b := pattern(id, sizes[(id+k)%len(sizes)])
			id++
			op.Bufs = append(op.Bufs, b)
			want = append(want, b...)
		}
		ops = append(ops, op)
	}
	for start, n := 0, 1; start < len(ops); start, n = start+n, n%40+1 {
		batch := ops[start:min(start+n, len(ops))]
		slices.Reverse(batch) // file growth is not sequential
		if err := g.Submit(batch); err != nil {
			t.Fatal(err)
		}
		for _, op := range batch {
			if op.Err != nil {
				t.Fatal(op.Err)
			}
		}
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file content mismatch: got %d bytes, want %d (first diff at %d)", len(got), len(want), firstDiff(got, want))
	}
	st := g.Stats()
	t.Logf("stats: %+v (SQEs per enter %.2f)", st, float64(st.SQEs)/float64(st.Enters))
	if st.Requests != int64(len(ops)) || st.SQEs < st.Requests || st.MaxBatch > int64(g.Entries()) || st.MaxBatch < int64(g.Entries()) {
		t.Fatalf("stats %+v: want Requests=%d, SQEs >= Requests and full batches of %d SQEs", st, len(ops), g.Entries())
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
			g := newTestRing(t, 4)
			f := tempFile(t)
			g.hooks.cqeRes = tc.short
			var bufs [][]byte
			var want []byte
			for i, n := range tc.sizes {
				b := pattern(i, n)
				bufs = append(bufs, b)
				want = append(want, b...)
			}
			const off = 7
			if err := writeAt(g, f, off, bufs); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got[off:], want) || len(got) != off+len(want) {
				t.Fatalf("content mismatch after short writes (len %d, want %d)", len(got), off+len(want))
			}
			if st := g.Stats(); st.Resubmits == 0 {
				t.Fatalf("no resubmission counted: %+v", st)
			}
		})
	}
}

// TestManyIovecs writes more buffers than IOV_MAX in one call.
func TestManyIovecs(t *testing.T) {
	g := newTestRing(t, 4)
	f := tempFile(t)
	var bufs [][]byte
	var want []byte
	for i := range iovMax*2 + 17 {
		b := pattern(i, 1+i%13)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	bufs = append(bufs, nil, []byte{}) // empty buffers are skipped
	if err := writeAt(g, f, 0, bufs); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, want) {
		t.Fatalf("content mismatch: len %d want %d, first diff %d", len(got), len(want), firstDiff(got, want))
	}
	if st := g.Stats(); st.SQEs != 3 {
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
	g := newTestRing(t, 4)
	f := tempFile(t)
	if err := writeAt(g, f, -1, [][]byte{{1}}); err == nil || !strings.Contains(err.Error(), "negative offset") {
		t.Errorf("negative offset: %v", err)
	}
	// Read-only file: the kernel's EBADF comes back as the write's error.
	ro, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := writeAt(g, ro, 0, [][]byte{[]byte("x")}); !errors.Is(err, unix.EBADF) {
		t.Errorf("write to read-only file: err = %v, want EBADF", err)
	}
	// One failed op does not fail the others of its Submit, and the ring still works.
	good, bad := &Op{Fd: int(f.Fd()), Bufs: [][]byte{[]byte("ok")}}, &Op{Fd: int(ro.Fd()), Bufs: [][]byte{[]byte("no")}}
	sync := &Op{Fd: int(f.Fd()), Fsync: true}
	empty := &Op{Fd: int(f.Fd()), Bufs: [][]byte{nil}}
	if err := g.Submit([]*Op{good, bad, sync, empty}); err != nil || good.Err != nil || !errors.Is(bad.Err, unix.EBADF) || sync.Err != nil || empty.Err != nil {
		t.Fatalf("mixed Submit: %v; ops %v %v %v %v", err, good.Err, bad.Err, sync.Err, empty.Err)
	}
	if got, _ := os.ReadFile(f.Name()); string(got) != "ok" {
		t.Fatalf("file holds %q", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	op := &Op{Fd: int(f.Fd()), Bufs: [][]byte{[]byte("x")}}
	if err := g.Submit([]*Op{op}); !errors.Is(err, ErrClosed) || !errors.Is(op.Err, ErrClosed) {
		t.Errorf("Submit after Close: %v, op %v; want ErrClosed", err, op.Err)
	}
}

// BenchmarkSubmit: one Submit of n 1 KiB writes (n = 1: a lone append; 8: a group commit of
// eight partitions' appends).
func BenchmarkSubmit(b *testing.B) {
	const span = 16 << 20 // offsets wrap within 16 MiB to keep the file small
	buf := pattern(1, 1<<10)
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			g := newTestRing(b, 0)
			f := tempFile(b)
			ops := make([]*Op, n)
			for i := range ops {
				ops[i] = &Op{Fd: int(f.Fd()), Bufs: [][]byte{buf}}
			}
			b.ReportAllocs()
			b.SetBytes(int64(n * len(buf)))
			var off int64
			for b.Loop() {
				for _, op := range ops {
					op.Off = off
					off = (off + int64(len(buf))) % span
				}
				if err := g.Submit(ops); err != nil {
					b.Fatal(err)
				}
			}
			st := g.Stats()
			b.ReportMetric(float64(st.SQEs)/float64(st.Enters), "SQEs/enter")
		})
	}
}
