package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOSCountsSyscalls: every file call through NewOS is counted with its bytes in its own
// Counters; OS and MemFS count nothing.
func TestOSCountsSyscalls(t *testing.T) {
	dir := t.TempDir()
	var c, other Counters
	fs := NewOS(&c)
	NewOS(&other) // another owner's: stays at zero
	before := c.Syscalls()
	f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("HE"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "HEllo" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	d := c.Syscalls().Sub(before)
	if d != (SyscallCounts{Pread: 1, Pwrite: 1, Write: 1, Fsync: 2, ReadBytes: 5, WriteBytes: 7}) {
		t.Fatalf("counted %+v", d)
	}
	m := NewMemFS(nil)
	mf, err := m.OpenFile("/x", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before = c.Syscalls()
	mf.Write([]byte("abc"))
	mf.Sync()
	if err := OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if d := c.Syscalls().Sub(before); d != (SyscallCounts{}) {
		t.Fatalf("MemFS or OS counted %+v", d)
	}
	if o := other.Syscalls(); o != (SyscallCounts{}) {
		t.Fatalf("another file system's counters counted %+v", o)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = f.ReadAt(buf[:1], 0) }); n != 0 {
		t.Fatalf("a counted ReadAt allocates %v times", n)
	}
}
