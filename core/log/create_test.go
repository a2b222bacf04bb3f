package log

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCreate: Create makes a new log in an empty directory out of one file (the first
// segment's .log), appends to it as to an opened one, and a reopen finds what was appended;
// a directory that already holds a log is refused and left as it was.
func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Create(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"00000000000000000000.log"}; !slices.Equal(names, want) {
		t.Fatalf("Create left %v, want %v", names, want)
	}
	if l.LEO() != 0 || l.LogStart() != 0 || l.Size() != 0 || l.Segments() != 1 {
		t.Fatalf("created log: LEO %d, log start %d, size %d, %d segments; want an empty log of one segment", l.LEO(), l.LogStart(), l.Size(), l.Segments())
	}
	mustAppend(t, l, batch(3, 10, "a", 1))
	mustAppend(t, l, batch(2, 10, "b", 2))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, testConfig()); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing log = %v, want exist", err)
	}
	l2, rec := mustOpen(t, dir, testConfig())
	defer l2.Close()
	if l2.LEO() != 5 || rec.TruncatedBytes != 0 {
		t.Fatalf("reopened: LEO %d, recovery %+v; want LEO 5 and nothing truncated", l2.LEO(), rec)
	}
	checkContiguous(t, allRecords(t, l2), 0, 5)
}
