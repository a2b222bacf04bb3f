package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func write(t *testing.T, fs FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func contents(t *testing.T, fs FS, name string) string {
	t.Helper()
	b, err := ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMemFSCrashKeepsSyncedOnly pins the crash model: unsynced contents are lost, synced ones
// and journaled metadata (create, truncate, rename, remove) survive.
func TestMemFSCrashKeepsSyncedOnly(t *testing.T) {
	m := NewMemFS(nil)
	if err := m.MkdirAll("d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	f := write(t, m, "d/a", "hello", true)
	if _, err := f.WriteAt([]byte(" world"), 5); err != nil {
		t.Fatal(err)
	}
	write(t, m, "d/b", "unsynced", false)
	g := write(t, m, "d/c", "0123456789", true)
	if err := g.Truncate(4); err != nil {
		t.Fatal(err)
	}
	write(t, m, "d/r", "renamed", true)
	if err := m.Rename("d/r", "d/e/r2"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "d/gone", "x", true)
	if err := m.Remove("d/gone"); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, m, "d/a"); got != "hello world" {
		t.Fatalf("before crash d/a = %q", got)
	}
	c := m.CrashClone()
	for name, want := range map[string]string{"d/a": "hello", "d/b": "", "d/c": "0123", "d/e/r2": "renamed"} {
		if got := contents(t, c, name); got != want {
			t.Errorf("after crash %s = %q, want %q", name, got, want)
		}
	}
	if _, err := c.Stat("d/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removed file after crash: %v", err)
	}
	if _, err := c.Stat("d/r"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("renamed-away file after crash: %v", err)
	}
	// The original is untouched by the clone.
	if got := contents(t, m, "d/a"); got != "hello world" {
		t.Fatalf("original after clone d/a = %q", got)
	}
}

func TestMemFSErrors(t *testing.T) {
	m := NewMemFS(nil)
	if _, err := m.OpenFile("nodir/x", os.O_CREATE|os.O_RDWR, 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("create without parent: %v", err)
	}
	m.SetCapacity(10)
	f := write(t, m, "a", "12345", false)
	if _, err := f.WriteAt([]byte("123456"), 5); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: %v", err)
	}
	m.SetCapacity(0)
	m.SetInjector(func(op Op, path string) error {
		if op == OpSync && filepath.Base(path) == "a" {
			return syscall.EIO
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected sync error: %v", err)
	}
	// Out of descriptors: every open fails, the files already open keep working.
	m.SetInjector(func(op Op, path string) error {
		if op == OpOpen {
			return syscall.EMFILE
		}
		return nil
	})
	if _, err := m.OpenFile("a", os.O_RDONLY, 0); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("open with no descriptor left: %v", err)
	}
	if _, err := m.ReadDir("."); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("readdir with no descriptor left: %v", err)
	}
	if err := m.SyncDir("."); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("syncdir with no descriptor left: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("read of an open file with no descriptor left: %v", err)
	}
	m.SetInjector(nil)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	// A removed file stays readable through an open handle.
	g := write(t, m, "b", "keep", true)
	if err := m.Remove("b"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := g.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) || string(buf) != "keep" {
		t.Fatalf("read of removed open file: %q %v", buf, err)
	}
	ents, err := m.ReadDir(".")
	if err != nil || len(ents) != 1 || ents[0].Name() != "a" {
		t.Fatalf("ReadDir = %v, %v", ents, err)
	}
}

func TestWriteFileAtomicOS(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFileAtomic(OS, p, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(OS, p, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, OS, p); got != "v2" {
		t.Fatalf("got %q", got)
	}
}

// TestWriteFileReplace: the new contents replace the old whole and no .tmp is left, without
// fsync: after a crash a strict file system still holds the old file, a journaling one the
// renamed file without its unsynced data.
func TestWriteFileReplace(t *testing.T) {
	for _, strict := range []bool{true, false} {
		m := NewMemFS(nil)
		if strict {
			m = NewStrictMemFS(nil)
		}
		if err := MkdirAllDurable(m, "/d"); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(m, "/d/f", []byte("v1")); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileReplace(m, "/d/f", []byte("v2")); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, m, "/d/f"); got != "v2" {
			t.Fatalf("strict=%v: got %q, want v2", strict, got)
		}
		if _, err := m.Stat("/d/f.tmp"); err == nil {
			t.Fatalf("strict=%v: the .tmp file is left", strict)
		}
		want := ""
		if strict {
			want = "v1"
		}
		if got := contents(t, m.CrashClone(), "/d/f"); got != want {
			t.Fatalf("strict=%v: after a crash %q, want %q (nothing was fsynced)", strict, got, want)
		}
	}
}

// TestMemFSRenameDir: a directory moves with its files (a stray replica directory is set
// aside so); it cannot replace an existing name.
func TestMemFSRenameDir(t *testing.T) {
	m := NewMemFS(nil)
	if err := m.MkdirAll("d/t-0/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, m, "d/t-0/a", "A", true)
	write(t, m, "d/t-0/sub/b", "B", true)
	if err := m.MkdirAll("d/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("d/t-0", "d/x"); err == nil {
		t.Error("renaming a directory onto an existing one succeeded")
	}
	if err := m.Rename("d/t-0", "d/t-0.1-stray"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"d/t-0.1-stray/a": "A", "d/t-0.1-stray/sub/b": "B"} {
		if got := contents(t, m, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, err := m.Stat("d/t-0"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old directory still there: %v", err)
	}
	if _, err := m.Stat("d/t-0/a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old file still there: %v", err)
	}
}

// TestStrictMemFSCrashKeepsSyncedEntries pins the strict model (pebble's NewStrictMem): a
// directory entry created, renamed or removed survives a crash only once its directory was
// synced after the change; a directory created without a sync of its parent is lost with
// everything under it. Crash (in place) and CrashClone leave the same thing.
func TestStrictMemFSCrashKeepsSyncedEntries(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		m := NewStrictMemFS(nil)
		mkdir := func(d string) {
			t.Helper()
			if err := m.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		syncDir := func(d string) {
			t.Helper()
			if err := m.SyncDir(d); err != nil {
				t.Fatal(err)
			}
		}
		mkdir("/d")
		syncDir("/")
		write(t, m, "/d/unsynced-entry", "synced contents", true)
		write(t, m, "/d/kept", "kept", true)
		write(t, m, "/d/old", "old", true)
		write(t, m, "/d/gone", "x", true)
		write(t, m, "/d/back", "back", true)
		syncDir("/d")
		write(t, m, "/d/new-entry", "new", true) // created after the sync
		if err := m.Rename("/d/old", "/d/renamed"); err != nil {
			t.Fatal(err)
		}
		if err := m.Remove("/d/gone"); err != nil {
			t.Fatal(err)
		}
		// The rename and the removal are durable, new-entry too; WriteFileAtomic syncs /d again.
		syncDir("/d")
		if err := WriteFileAtomic(m, "/d/ckpt", []byte("c")); err != nil {
			t.Fatal(err)
		}
		if err := m.Remove("/d/back"); err != nil { // never synced: back after the crash
			t.Fatal(err)
		}
		write(t, m, "/d/late", "late", true) // never synced: gone
		// "/" is not synced after this: /e is lost with everything under it, synced or not.
		mkdir("/e/sub")
		write(t, m, "/e/sub/f", "f", true)
		syncDir("/e/sub")
		syncDir("/e")
		c := m
		if inPlace {
			if err := m.Crash(); err != nil {
				t.Fatal(err)
			}
		} else {
			c = m.CrashClone()
		}
		for name, want := range map[string]string{"/d/kept": "kept", "/d/renamed": "old", "/d/new-entry": "new",
			"/d/back": "back", "/d/unsynced-entry": "synced contents", "/d/ckpt": "c"} {
			if got := contents(t, c, name); got != want {
				t.Errorf("in place %v: after crash %s = %q, want %q", inPlace, name, got, want)
			}
		}
		for _, name := range []string{"/d/old", "/d/gone", "/d/late", "/d/ckpt.tmp", "/e", "/e/sub/f"} {
			if _, err := c.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("in place %v: %s after crash: %v, want gone", inPlace, name, err)
			}
		}
		if c.Used() != int64(len("kept")+len("old")+len("new")+len("back")+len("synced contents")+len("c")) {
			t.Errorf("in place %v: used %d after crash", inPlace, c.Used())
		}
		// After a crash the namespace found is durable: a second crash keeps it.
		c2 := c.CrashClone()
		if got := contents(t, c2, "/d/renamed"); got != "old" {
			t.Errorf("in place %v: after a second crash /d/renamed = %q", inPlace, got)
		}
	}
}

// TestStrictMemFSUnsyncedRename: without a directory sync, a crash after a rename over an
// existing name leaves the old file there (the rename of WriteFileAtomic is durable only
// with its directory sync); Clone keeps what was synced.
func TestStrictMemFSUnsyncedRename(t *testing.T) {
	m := NewStrictMemFS(nil)
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(m, "/d/f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/f.tmp", "v2", true)
	if err := m.Rename("/d/f.tmp", "/d/f"); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, m, "/d/f"); got != "v2" {
		t.Fatalf("before the crash /d/f = %q", got)
	}
	for _, c := range []*MemFS{m.CrashClone(), m.Clone().CrashClone()} {
		if got := contents(t, c, "/d/f"); got != "v1" {
			t.Errorf("after the crash /d/f = %q, want v1 (the rename was not synced)", got)
		}
		if _, err := c.Stat("/d/f.tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the crash /d/f.tmp: %v", err)
		}
	}
}

// TestMkdirAllDurable: the directories MkdirAllDurable creates survive a crash of a strict
// MemFS (their parents are synced); MkdirAll's do not.
func TestMkdirAllDurable(t *testing.T) {
	m := NewStrictMemFS(nil)
	if err := MkdirAllDurable(m, "/x"); err != nil {
		t.Fatal(err)
	}
	if err := m.MkdirAll("/x/plain/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(m, "/durable/a/b"); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(m, "/durable/a/b"); err != nil { // exists: nothing to do
		t.Fatal(err)
	}
	c := m.CrashClone()
	if _, err := c.Stat("/durable/a/b"); err != nil {
		t.Errorf("after a crash: %v", err)
	}
	if _, err := c.Stat("/x/plain"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory MkdirAll created without a sync of its parent survived: %v", err)
	}
}
