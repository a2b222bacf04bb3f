package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOSCountsSyscalls: every file call through OS is counted with its bytes; MemFS is not.
func TestOSCountsSyscalls(t *testing.T) {
	dir := t.TempDir()
	before := Syscalls()
	f, err := OS.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
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
	if err := OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	d := Syscalls().Sub(before)
	// Other tests of the package may run meanwhile; none runs in parallel with this one.
	if d != (SyscallCounts{Pread: 1, Pwrite: 1, Write: 1, Fsync: 2, ReadBytes: 5, WriteBytes: 7}) {
		t.Fatalf("counted %+v", d)
	}
	m := NewMemFS(nil)
	mf, err := m.OpenFile("/x", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before = Syscalls()
	mf.Write([]byte("abc"))
	mf.Sync()
	if d := Syscalls().Sub(before); d != (SyscallCounts{}) {
		t.Fatalf("MemFS counted %+v", d)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = f.ReadAt(buf[:1], 0) }); n != 0 {
		t.Fatalf("a counted ReadAt allocates %v times", n)
	}
}
