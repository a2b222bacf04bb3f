package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDeferFS: on a strict MemFS, what is created and "synced" through a DeferFS is lost by
// a crash before Commit and kept by one after it; after Commit syncs go through again.
func TestDeferFS(t *testing.T) {
	create := func(fs FS, dir string) {
		t.Helper()
		if err := MkdirAllDurable(fs, dir); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(fs, filepath.Join(dir, "meta"), []byte("topic_id: x\n")); err != nil {
			t.Fatal(err)
		}
	}
	m := NewStrictMemFS(nil)
	if err := m.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	d := NewDeferFS(m, "/data")
	if !d.Deferring() {
		t.Fatal("a DeferFS over a MemFS does not defer")
	}
	create(d, "/data/t-0")
	create(d, "/data/t-1")
	if _, err := m.CrashClone().Stat("/data/t-0"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before Commit a crash keeps /data/t-0 (%v): the syncs were not deferred", err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	for _, p := range []string{"/data/t-0/meta", "/data/t-1/meta"} {
		if b, err := ReadFile(c, p); err != nil || string(b) != "topic_id: x\n" {
			t.Fatalf("after Commit a crash leaves %s as %q, %v", p, b, err)
		}
	}
	// After Commit, syncs are real: a file written and synced now survives a crash.
	create(d, "/data/t-2")
	if b, err := ReadFile(m.CrashClone(), "/data/t-2/meta"); err != nil || len(b) == 0 {
		t.Fatalf("after Commit, a synced file is lost by a crash: %q, %v", b, err)
	}
}

// TestDeferFSCommitError: a failing syncfs is Commit's error, naming the directory.
func TestDeferFSCommitError(t *testing.T) {
	m := NewMemFS(nil)
	if err := m.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	e := NewErrorFS(m)
	eio := errors.New("input/output error")
	e.SetInjector(func(op Op, path string) error {
		if op == OpSync {
			return eio
		}
		return nil
	})
	d := NewDeferFS(e, "/data")
	if err := d.SyncDir("/data"); err != nil {
		t.Fatalf("deferred SyncDir: %v", err)
	}
	if err := d.Commit(); !errors.Is(err, eio) {
		t.Fatalf("Commit = %v, want the injected error", err)
	}
	if d.Deferring() {
		t.Fatal("still deferring after a failed Commit")
	}
}

// TestDeferFSOnOS: over the operating system's file system Commit is one syncfs(2).
func TestDeferFSOnOS(t *testing.T) {
	dir := t.TempDir()
	var c Counters
	fs := NewOS(&c)
	d := NewDeferFS(fs, dir)
	before := c.Syscalls().Fsync
	for _, name := range []string{"a", "b", "c"} {
		if err := WriteFileAtomic(d, filepath.Join(dir, name), []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Syscalls().Fsync - before; n != 0 {
		t.Fatalf("%d fsyncs while deferring", n)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := c.Syscalls().Fsync - before; n != 1 {
		t.Fatalf("Commit made %d fsync calls, want 1 syncfs", n)
	}
	if b, err := ReadFile(OS, filepath.Join(dir, "b")); err != nil || string(b) != "b" {
		t.Fatalf("read back: %q %v", b, err)
	}
}

// TestPowerLossSyncFS: a SyncFS makes every file durable at its size then, whether it was
// closed before (its size known from the close) or is still open for writing; what is
// written after it is lost in a crash, including by a file reopened after it.
func TestPowerLossSyncFS(t *testing.T) {
	p := NewPowerLossFS(NewMemFS(nil))
	if err := p.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, p, "/d/closed", "aaaa", false).Close()
	reopened := write(t, p, "/d/reopened", "bb", false)
	reopened.Close()
	open := write(t, p, "/d/open", "cc", false)
	if err := p.SyncFS("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := open.WriteAt([]byte("lost"), 2); err != nil {
		t.Fatal(err)
	}
	open.Close()
	f, err := p.OpenFile("/d/reopened", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("lost"), 2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, p, "/d/new", "lost", false).Close()
	if err := p.Crash(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"/d/closed": "aaaa", "/d/reopened": "bb", "/d/open": "cc", "/d/new": ""} {
		if got := contents(t, p, name); got != want {
			t.Errorf("%s after the crash: %q, want %q", name, got, want)
		}
	}
}

// TestPowerLossSyncFSKnownSize: a file created (or truncated) and written through the
// wrapper is made durable by a SyncFS after its close at the size its writes gave it, with
// no stat; one also written through its descriptor (File.OS) at its real size.
func TestPowerLossSyncFSKnownSize(t *testing.T) {
	dir := t.TempDir()
	p := NewPowerLossFS(OS)
	open := func(name string) File {
		f, err := p.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := open("a")
	if _, err := a.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("de"), 3); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := open("b")
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OS().WriteAt([]byte("yz"), 1); err != nil { // bypasses the wrapper
		t.Fatal(err)
	}
	b.Close()
	c := open("c") // still open at the SyncFS: durable at the size its writes gave it
	if _, err := c.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := p.Crash(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "abcde", "b": "xyz", "c": "kept"} {
		if got := contents(t, p, filepath.Join(dir, name)); got != want {
			t.Errorf("%s after SyncFS and a crash: %q, want %q", name, got, want)
		}
	}
}
