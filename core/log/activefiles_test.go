package log

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestActiveFilesStayBounded: many logs sharing a cache of 3 active files keep at most 3 of
// their active segments open (plus what a write or a read holds for a moment), whatever
// order they are written and read in; every log's records stay readable and appendable
// after its file was closed, concurrent writers and readers included, and a reopen finds
// them all.
func TestActiveFilesStayBounded(t *testing.T) {
	const logs, cacheSize = 12, 3
	fs := newFdFS(nil)
	root := t.TempDir()
	cfg := testConfig()
	cfg.FS = fs
	cfg.cache = newFileCache(2)
	cfg.active = newActiveCache(cacheSize)
	bound := int64(cacheSize + 2) // the active cache, the sealed one (empty: nothing rolls)
	open := func() []*Log {
		ls := make([]*Log, logs)
		for i := range ls {
			ls[i], _ = mustOpen(t, filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg)
		}
		return ls
	}
	ls := open()
	for round := 0; round < 3; round++ {
		for i, l := range ls {
			mustAppend(t, l, batch(2, 100, fmt.Sprintf("r%d-l%d", round, i), 1))
			if got := fs.open.Load(); got > bound {
				t.Fatalf("round %d, log %d: %d files open, want at most %d", round, i, got, bound)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, logs)
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				if _, err := l.Append(batch(1, 50, fmt.Sprintf("c%d-%d", i, k), 1), true, 0); err != nil {
					errs <- fmt.Errorf("log %d append %d: %w", i, k, err)
					return
				}
				s, err := l.Read(0, l.LEO(), 1<<20, true)
				if err != nil {
					errs <- fmt.Errorf("log %d read %d: %w", i, k, err)
					return
				}
				if _, err := s.ReadAll(nil); err != nil {
					errs <- fmt.Errorf("log %d read %d: %w", i, k, err)
				}
				s.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := fs.open.Load(); got > bound {
		t.Fatalf("after concurrent writers: %d files open, want at most %d", got, bound)
	}
	want := int64(3*2 + 20)
	for i, l := range ls {
		if l.LEO() != want {
			t.Fatalf("log %d: LEO %d, want %d", i, l.LEO(), want)
		}
		checkContiguous(t, allRecords(t, l), 0, want)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fs.open.Load(); got != 0 {
		t.Fatalf("%d files open after Close", got)
	}
	for i, l := range open() {
		if l.LEO() != want {
			t.Fatalf("reopened log %d: LEO %d, want %d", i, l.LEO(), want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
