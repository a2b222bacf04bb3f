package log

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWritersCountSyscalls: one pwritev per PwritevWriter.WriteAt, one pwrite per buffer of
// WriteWriter, with their bytes, in the Counters given them; another owner's stay at zero.
func TestWritersCountSyscalls(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs := [][]byte{[]byte("abc"), []byte("defg")}
	var c, other Counters
	pw, ww := CountedWriter(nil, &c), CountedWriter(WriteWriter{}, &c)
	CountedWriter(PwritevWriter{}, &other)
	before := c.Syscalls()
	if err := pw.WriteAt(f, 0, bufs); err != nil {
		t.Fatal(err)
	}
	if err := ww.WriteAt(f, 7, bufs); err != nil {
		t.Fatal(err)
	}
	if err := (PwritevWriter{}).WriteAt(f, 0, bufs); err != nil { // counted nowhere
		t.Fatal(err)
	}
	d := c.Syscalls().Sub(before)
	if d.Pwritev != 1 || d.Pwrite != 2 || d.WriteBytes != 14 || d.IOUringEnter != 0 {
		t.Fatalf("counted %+v, want 1 pwritev, 2 pwrite, 14 bytes", d)
	}
	if o := other.Syscalls(); o.Pwritev != 0 || o.Pwrite != 0 || o.WriteBytes != before.WriteBytes {
		t.Fatalf("another owner's counters counted %+v", o)
	}
	if n := testing.AllocsPerRun(100, func() { _ = pw.WriteAt(f, 0, bufs) }); n != 0 {
		t.Fatalf("a counted pwritev allocates %v times", n)
	}
}

// TestUringCountsPerOwner: the process's one io_uring writer counts each owner's writes,
// fsyncs and io_uring_enter calls in that owner's Counters (CountedWriter): two owners
// writing through one ring count apart, and their enter calls add up to the ring's.
func TestUringCountsPerOwner(t *testing.T) {
	uw := newTestUring(t, 0)
	f := tempSegment(t)
	var a, b Counters
	wa, wb := CountedWriter(uw, &a), CountedWriter(uw, &b)
	if wa.Name() != "uring" {
		t.Fatalf("counted uring writer named %q", wa.Name())
	}
	if _, ok := CountedWriter(wa, &b).(Syncer); !ok {
		t.Fatal("a re-counted uring writer lost its Fsync")
	}
	bufs := [][]byte{[]byte("abc"), []byte("defg")}
	ring0 := uw.Stats().Enters
	for i := range 3 {
		if err := wa.WriteAt(f, int64(7*i), bufs); err != nil {
			t.Fatal(err)
		}
	}
	if err := wa.(Syncer).Fsync(f); err != nil {
		t.Fatal(err)
	}
	if err := wb.WriteAt(f, 100, bufs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := uw.WriteAt(f, 200, bufs); err != nil { // counted nowhere
		t.Fatal(err)
	}
	ca, cb := a.Syscalls(), b.Syscalls()
	if ca.WriteBytes != 21 || ca.IOUringEnter < 4 || ca.Pwritev != 0 {
		t.Errorf("owner A counted %+v, want 21 bytes and at least 4 io_uring_enter calls (3 writes, 1 fsync)", ca)
	}
	if cb.WriteBytes != 3 || cb.IOUringEnter < 1 {
		t.Errorf("owner B counted %+v, want 3 bytes and at least 1 io_uring_enter call", cb)
	}
	if ring := uw.Stats().Enters - ring0; ca.IOUringEnter+cb.IOUringEnter >= ring {
		t.Errorf("owners counted %d + %d io_uring_enter calls, the ring made %d (one of them uncounted)", ca.IOUringEnter, cb.IOUringEnter, ring)
	}
	got := make([]byte, 3*7)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "abcdefgabcdefgabcdefg" {
		t.Errorf("file holds %q (%v)", got, err)
	}
}
