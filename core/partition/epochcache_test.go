package partition

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEpochCacheAssign(t *testing.T) {
	c := NewEpochCache()
	steps := []struct {
		epoch   int32
		start   int64
		changed bool
		want    []EpochEntry
	}{
		{0, 0, true, []EpochEntry{{0, 0}}},
		{0, 5, false, []EpochEntry{{0, 0}}}, // every batch of epoch 0 re-assigns: no-op
		{1, 10, true, []EpochEntry{{0, 0}, {1, 10}}},
		{0, 12, false, []EpochEntry{{0, 0}, {1, 10}}}, // stale epoch ignored
		{3, 10, true, []EpochEntry{{0, 0}, {3, 10}}},  // epoch 1 had no records: replaced
		{4, 8, true, []EpochEntry{{0, 0}, {4, 8}}},    // non-monotonic start: later entries dropped
		{-1, 20, false, []EpochEntry{{0, 0}, {4, 8}}}, // old-format batches
	}
	for i, s := range steps {
		changed, err := c.Assign(s.epoch, s.start)
		if err != nil {
			t.Fatal(err)
		}
		if changed != s.changed || !reflect.DeepEqual(c.Entries(), s.want) {
			t.Fatalf("step %d Assign(%d, %d): changed=%v entries=%v, want %v %v", i, s.epoch, s.start, changed, c.Entries(), s.changed, s.want)
		}
	}
}

func TestEpochCacheEpochOf(t *testing.T) {
	c := NewEpochCache()
	if e := c.EpochOf(0); e != UndefinedEpoch {
		t.Fatalf("empty cache: EpochOf(0) = %d", e)
	}
	for _, e := range []EpochEntry{{1, 5}, {3, 20}} {
		c.Assign(e.Epoch, e.StartOffset)
	}
	for _, tc := range []struct {
		off  int64
		want int32
	}{{4, UndefinedEpoch}, {5, 1}, {19, 1}, {20, 3}, {1000, 3}} {
		if got := c.EpochOf(tc.off); got != tc.want {
			t.Errorf("EpochOf(%d) = %d, want %d", tc.off, got, tc.want)
		}
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	c := NewEpochCache()
	for _, e := range []EpochEntry{{2, 10}, {4, 30}, {7, 45}} {
		c.Assign(e.Epoch, e.StartOffset)
	}
	const leo = 60
	for _, tc := range []struct {
		req     int32
		epoch   int32
		end     int64
		comment string
	}{
		{7, 7, 60, "latest -> LEO"},
		{4, 4, 45, "start of next epoch"},
		{5, 4, 45, "largest epoch <= requested"},
		{6, 4, 45, "largest epoch <= requested"},
		{2, 2, 30, ""},
		{3, 2, 30, ""},
		{1, 1, 10, "older than every entry: requested, first start"},
		{8, -1, -1, "newer than latest: undefined"},
		{-1, -1, -1, "undefined request"},
	} {
		e, end := c.EndOffsetFor(tc.req, leo)
		if e != tc.epoch || end != tc.end {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d) %s", tc.req, e, end, tc.epoch, tc.end, tc.comment)
		}
	}
	if e, end := NewEpochCache().EndOffsetFor(3, 10); e != -1 || end != -1 {
		t.Errorf("empty cache: (%d, %d), want (-1, -1)", e, end)
	}
	if got := c.StartOffsetOf(4); got != 30 {
		t.Errorf("StartOffsetOf(4) = %d", got)
	}
	if got := c.StartOffsetOf(5); got != -1 {
		t.Errorf("StartOffsetOf(5) = %d, want -1", got)
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	c := NewEpochCache()
	for _, e := range []EpochEntry{{2, 10}, {4, 30}, {7, 45}} {
		c.Assign(e.Epoch, e.StartOffset)
	}
	c.TruncateFromEnd(45)
	if want := []EpochEntry{{2, 10}, {4, 30}}; !reflect.DeepEqual(c.Entries(), want) {
		t.Fatalf("TruncateFromEnd(45) = %v, want %v", c.Entries(), want)
	}
	c.TruncateFromEnd(31)
	if want := []EpochEntry{{2, 10}, {4, 30}}; !reflect.DeepEqual(c.Entries(), want) {
		t.Fatalf("TruncateFromEnd(31) = %v, want %v", c.Entries(), want)
	}
	c.TruncateFromStart(20)
	if want := []EpochEntry{{2, 20}, {4, 30}}; !reflect.DeepEqual(c.Entries(), want) {
		t.Fatalf("TruncateFromStart(20) = %v, want %v", c.Entries(), want)
	}
	c.TruncateFromStart(35)
	if want := []EpochEntry{{4, 35}}; !reflect.DeepEqual(c.Entries(), want) {
		t.Fatalf("TruncateFromStart(35) = %v, want %v", c.Entries(), want)
	}
	if c.Latest() != 4 {
		t.Fatalf("Latest = %d", c.Latest())
	}
}

func TestEpochCachePersist(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadEpochCache(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Latest() != UndefinedEpoch {
		t.Fatalf("fresh cache latest %d", c.Latest())
	}
	c.Assign(0, 0)
	c.Assign(3, 1500)
	data, err := os.ReadFile(filepath.Join(dir, EpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "0\n2\n0 0\n3 1500\n"; got != want {
		t.Fatalf("checkpoint file %q, want Kafka format %q", got, want)
	}
	c2, err := LoadEpochCache(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2.Entries(), c.Entries()) {
		t.Fatalf("reloaded %v, want %v", c2.Entries(), c.Entries())
	}
	c2.TruncateFromEnd(1000)
	c3, _ := LoadEpochCache(nil, dir)
	if want := []EpochEntry{{0, 0}}; !reflect.DeepEqual(c3.Entries(), want) {
		t.Fatalf("after TruncateFromEnd reloaded %v, want %v", c3.Entries(), want)
	}
}

func TestEpochCacheBadFiles(t *testing.T) {
	for _, tc := range []struct{ content, wantErr string }{
		{"1\n0\n", "unsupported version 1"},
		{"0\n2\n0 0\n", "missing"},
		{"0\n1\n0 0\n5 5\n", "more lines"},
		{"0\nx\n", "count line"},
		{"zero\n", "version line"},
		{"0\n1\n0\n", "want \"epoch startOffset\""},
		{"0\n2\n3 10\n2 20\n", "epochs must increase"},
		{"0\n2\n2 20\n3 10\n", "start offsets must not decrease"},
		{"0\n1\n-1 0\n", "non-negative"},
		{"", "version line"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte(tc.content), 0o644)
		_, err := LoadEpochCache(nil, dir)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("content %q: err %v, want it to mention %q", tc.content, err, tc.wantErr)
		}
	}
}

func FuzzLoadEpochCache(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n3 1500\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n99999999999\n"))
	f.Add([]byte("0\n1\n2147483648 0\n"))
	dir := f.TempDir()
	path := filepath.Join(dir, EpochCheckpointFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadEpochCache(nil, dir)
		if err != nil {
			return
		}
		entries := c.Entries()
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset < entries[i-1].StartOffset {
				t.Fatalf("accepted non-monotonic entries %v", entries)
			}
		}
	})
}
