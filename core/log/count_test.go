package log

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWritersCountSyscalls: one pwritev per PwritevWriter.WriteAt, one pwrite per buffer of
// WriteWriter, with their bytes.
func TestWritersCountSyscalls(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs := [][]byte{[]byte("abc"), []byte("defg")}
	before := Syscalls()
	if err := (PwritevWriter{}).WriteAt(f, 0, bufs); err != nil {
		t.Fatal(err)
	}
	if err := (WriteWriter{}).WriteAt(f, 7, bufs); err != nil {
		t.Fatal(err)
	}
	d := Syscalls().Sub(before)
	if d.Pwritev != 1 || d.Pwrite != 2 || d.WriteBytes != 14 || d.IOUringEnter != 0 {
		t.Fatalf("counted %+v, want 1 pwritev, 2 pwrite, 14 bytes", d)
	}
	if n := testing.AllocsPerRun(100, func() { _ = (PwritevWriter{}).WriteAt(f, 0, bufs) }); n != 0 {
		t.Fatalf("a counted pwritev allocates %v times", n)
	}
}
