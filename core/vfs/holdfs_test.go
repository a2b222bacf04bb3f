package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHoldFS: on a strict MemFS, while a HoldFS is held a "synced" write and a file
// replaced by WriteFileAtomic are not durable, the replaced file keeps its old contents
// whole (its rename waits for Release) and a crash keeps the old one; after Release both
// are durable, and syncs go through again.
func TestHoldFS(t *testing.T) {
	m := NewStrictMemFS(nil)
	h := NewHoldFS(m, "/data")
	if err := MkdirAllDurable(h, "/data/t-0"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(h, "/data/t-0/ckpt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	seg, err := h.OpenFile("/data/t-0/seg", os.O_RDWR|os.O_CREATE, 0o644) // opened before the hold
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if !h.Hold() {
		t.Fatal("Hold over a MemFS holds nothing")
	}
	if h.Hold() {
		t.Fatal("a second Hold while held reports true")
	}
	if _, err := seg.Write([]byte("records")); err != nil {
		t.Fatal(err)
	}
	if err := seg.Sync(); err != nil {
		t.Fatal(err)
	}
	if !SyncDeferred(seg) {
		t.Fatal("SyncDeferred of a held file is false")
	}
	if err := WriteFileAtomic(h, "/data/t-0/ckpt", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(m, "/data/t-0/ckpt"); err != nil || string(b) != "old" {
		t.Fatalf("while held the checkpoint reads %q, %v: want the old one until Release", b, err)
	}
	c := m.CrashClone()
	if b, _ := ReadFile(c, "/data/t-0/seg"); len(b) != 0 {
		t.Fatalf("a crash while held keeps %q of the segment: its Sync was not held", b)
	}
	if b, err := ReadFile(c, "/data/t-0/ckpt"); err != nil || string(b) != "old" {
		t.Fatalf("a crash while held leaves the checkpoint %q, %v: want the old one whole", b, err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	c = m.CrashClone()
	if b, err := ReadFile(c, "/data/t-0/seg"); err != nil || string(b) != "records" {
		t.Fatalf("after Release a crash leaves the segment %q, %v", b, err)
	}
	if b, err := ReadFile(c, "/data/t-0/ckpt"); err != nil || string(b) != "new" {
		t.Fatalf("after Release a crash leaves the checkpoint %q, %v", b, err)
	}
	if _, err := c.Stat("/data/t-0/ckpt.tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Release the checkpoint's .tmp is still there (%v)", err)
	}
	if SyncDeferred(seg) {
		t.Fatal("SyncDeferred after Release is true")
	}
	// Released: a synced write is durable at once.
	if _, err := seg.Write([]byte("+more")); err != nil {
		t.Fatal(err)
	}
	if err := seg.Sync(); err != nil {
		t.Fatal(err)
	}
	if b, _ := ReadFile(m.CrashClone(), "/data/t-0/seg"); string(b) != "records+more" {
		t.Fatalf("after Release a synced write is lost by a crash: %q", b)
	}
}

// TestHoldFSReleaseError: when Release's syncfs fails, none of the queued renames is made
// (the old checkpoint stays) and the error names the root.
func TestHoldFSReleaseError(t *testing.T) {
	m := NewMemFS(nil)
	e := NewErrorFS(m)
	h := NewHoldFS(e, "/data")
	if err := h.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(h, "/data/ckpt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if !h.Hold() {
		t.Fatal("Hold over an ErrorFS of a MemFS holds nothing")
	}
	if err := WriteFileAtomic(h, "/data/ckpt", []byte("new")); err != nil {
		t.Fatal(err)
	}
	eio := errors.New("input/output error")
	e.SetInjector(func(op Op, path string) error {
		if op == OpSync {
			return eio
		}
		return nil
	})
	if err := h.Release(); !errors.Is(err, eio) || !strings.Contains(err.Error(), "/data") {
		t.Fatalf("Release = %v, want the injected error naming /data", err)
	}
	if b, err := ReadFile(m, "/data/ckpt"); err != nil || string(b) != "old" {
		t.Fatalf("after a failed Release the checkpoint reads %q, %v: want the old one", b, err)
	}
	if h.Held() {
		t.Fatal("still held after a failed Release")
	}
}

// TestHoldFSOnOS: over the operating system's file system, closing files held costs no
// fsync until Release, which is two syncfs(2) calls (one with no rename queued); over a
// file system that cannot sync as a whole, Hold holds nothing.
func TestHoldFSOnOS(t *testing.T) {
	dir := t.TempDir()
	var c Counters
	h := NewHoldFS(NewOS(&c), dir)
	if !h.Hold() {
		t.Fatal("Hold over the OS holds nothing")
	}
	before := c.Syscalls().Fsync
	for _, name := range []string{"a", "b", "c"} {
		if err := WriteFileAtomic(h, filepath.Join(dir, name), []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Syscalls().Fsync - before; n != 0 {
		t.Fatalf("%d fsyncs while held", n)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if n := c.Syscalls().Fsync - before; n != 2 {
		t.Fatalf("Release made %d fsync calls, want 2 syncfs", n)
	}
	if b, err := ReadFile(OS, filepath.Join(dir, "b")); err != nil || string(b) != "b" {
		t.Fatalf("read back: %q %v", b, err)
	}
	if !h.Hold() {
		t.Fatal("Hold after Release holds nothing")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if n := c.Syscalls().Fsync - before; n != 3 {
		t.Fatalf("a Release with no rename queued made %d fsync calls, want 1 syncfs", n-2)
	}
	type plain struct{ FS } // hides SyncFS
	if NewHoldFS(plain{OS}, dir).Hold() {
		t.Fatal("Hold over a file system that cannot syncfs holds")
	}
}

// TestHoldFSSameFileTwice: a file replaced twice while held is, after Release, the second
// contents (one rename made, not a second one failing on the moved source).
func TestHoldFSSameFileTwice(t *testing.T) {
	m := NewStrictMemFS(nil)
	h := NewHoldFS(m, "/data")
	if err := MkdirAllDurable(h, "/data"); err != nil {
		t.Fatal(err)
	}
	if !h.Hold() {
		t.Fatal("Hold over a MemFS holds nothing")
	}
	for _, v := range []string{"1", "2"} {
		if err := WriteFileAtomic(h, "/data/ckpt", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(m.CrashClone(), "/data/ckpt"); err != nil || string(b) != "2" {
		t.Fatalf("after Release a crash leaves %q, %v; want the second contents", b, err)
	}
}

// TestMkdirNewAndOpen: MkdirNew creates a directory through the views of this package
// (and refuses an existing one, fs.ErrExist), and OS's OpenFile reports a missing file as os.OpenFile
// does (an *os.PathError matching fs.ErrNotExist) and opens a file that can be written.
func TestMkdirNewAndOpen(t *testing.T) {
	dir := t.TempDir()
	fs := NewDeferFS(NewHoldFS(NewPowerLossFS(OS), dir), dir)
	sub := filepath.Join(dir, "t-0")
	if err := MkdirNew(fs, sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirNew(fs, sub, 0o755); !errors.Is(err, os.ErrExist) {
		t.Fatalf("MkdirNew of an existing directory = %v, want exist", err)
	}
	if err := MkdirNew(NewMemFS(nil), "/", 0o755); !errors.Is(err, os.ErrExist) {
		t.Fatalf("MkdirNew of an existing MemFS directory = %v, want exist", err)
	}
	if st, err := os.Stat(sub); err != nil || !st.IsDir() {
		t.Fatalf("MkdirNew made no directory: %v", err)
	}
	if err := MkdirNew(fs, filepath.Join(dir, "no", "parent"), 0o755); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirNew without a parent = %v, want not exist", err)
	}
	_, err := OS.OpenFile(filepath.Join(sub, "missing"), os.O_RDONLY, 0)
	var pe *os.PathError
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "open" {
		t.Fatalf("opening a missing file = %v, want an *os.PathError open ... not exist", err)
	}
	f, err := OS.OpenFile(filepath.Join(sub, "f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OS.OpenFile(filepath.Join(sub, "f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL on an existing file = %v, want exist", err)
	}
}
