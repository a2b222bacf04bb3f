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
