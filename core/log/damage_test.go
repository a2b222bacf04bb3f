package log

import (
	"errors"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
)

// damageLog writes 40 batches of 5 records (segments of 4 KiB: several sealed ones), closes
// the log cleanly (the recovery point at the LEO: nothing is CRC-checked by the next Open)
// and returns its directory and every batch's (base offset, segment file, position).
func damageLog(t *testing.T) (dir string, batches []SegmentBatch, files []string) {
	t.Helper()
	dir = t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	for i := 0; i < 40; i++ {
		mustAppend(t, l, batch(5, 40, "d", 1000))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range segFiles(t, dir, ".log") {
		p := name
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		w := NewSegmentWalker(f, name, st.Size(), -1)
		for w.Next() {
			batches = append(batches, w.Batch())
			files = append(files, p)
		}
		f.Close()
	}
	if len(batches) != 40 {
		t.Fatalf("walked %d batches, want 40", len(batches))
	}
	return dir, batches, files
}

// flip inverts one byte inside the records of the batch at position pos of file.
func flip(t *testing.T, file string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	at := pos + records.HeaderSize + 3
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

type damages struct {
	sync.Mutex
	got []DamageError
}

func (d *damages) add(e DamageError) { d.Lock(); d.got = append(d.got, e); d.Unlock() }

func (d *damages) list() []DamageError {
	d.Lock()
	defer d.Unlock()
	return append([]DamageError(nil), d.got...)
}

// TestDamagedBatchNotServed: a batch that fails its CRC in a segment found at Open is never
// served, in a sealed segment or in the active one; the batches before it are, and the
// damage is reported with its file and offset.
func TestDamagedBatchNotServed(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(n int) int
	}{
		{"oldest segment", func(int) int { return 2 }},
		{"active segment", func(n int) int { return n - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, batches, files := damageLog(t)
			i := tc.pick(len(batches))
			bad := batches[i]
			if active := files[i] == files[len(files)-1]; active != (tc.name == "active segment") {
				t.Fatalf("batch %d in the active segment: %v", i, active)
			}
			flip(t, files[i], bad.Position)
			var d damages
			cfg := testConfig()
			cfg.OnDamage = d.add
			l, rec := mustOpen(t, dir, cfg)
			defer l.Close()
			if rec.TruncatedAtOffset >= 0 {
				t.Fatalf("a clean log's Open truncated: %v", rec)
			}
			// Reading from the start: everything before the bad batch, never it.
			var served int64
			off := int64(0)
			for off < l.LEO() {
				s, err := l.Read(off, math.MaxInt64, 1<<20, true)
				if err != nil {
					dmg := AsDamage(err)
					if dmg == nil || !errors.Is(err, kerr.KafkaStorageError) {
						t.Fatalf("Read(%d): %v, want a DamageError wrapping KAFKA_STORAGE_ERROR", off, err)
					}
					if dmg.Offset != bad.Header.BaseOffset || dmg.File != files[i] || dmg.Position != bad.Position {
						t.Fatalf("damage %+v, want offset %d at position %d of %s", dmg, bad.Header.BaseOffset, bad.Position, files[i])
					}
					break
				}
				b, err := s.ReadAll(nil)
				s.Release()
				if err != nil {
					t.Fatal(err)
				}
				for p := 0; p < len(b); {
					h, err := records.Validate(b[p:])
					if err != nil {
						t.Fatalf("served a batch that fails validation at offset %d: %v", off, err)
					}
					p += h.Size()
				}
				served = s.NextOffset
				off = s.NextOffset
			}
			if served != bad.Header.BaseOffset {
				t.Fatalf("served up to %d, want up to the damaged batch at %d", served, bad.Header.BaseOffset)
			}
			if len(d.list()) == 0 || d.list()[0].Offset != bad.Header.BaseOffset {
				t.Fatalf("OnDamage got %+v, want the batch at %d", d.list(), bad.Header.BaseOffset)
			}
			// Past it, the log is served as before.
			if next := bad.Header.NextOffset(); next < l.LEO() {
				s, err := l.Read(next, math.MaxInt64, 1<<20, true)
				if err != nil || s.Size == 0 {
					t.Fatalf("Read past the damage: %v (size %d)", err, s.Size)
				}
				s.Release()
			}
			// Truncating below the damage and appending again heals the log.
			if err := l.TruncateTo(bad.Header.BaseOffset); err != nil {
				t.Fatal(err)
			}
			for l.LEO() < 200 {
				mustAppend(t, l, batch(5, 40, "h", 1000))
			}
			if n := len(allRecords(t, l)); n != 200 {
				t.Fatalf("after healing %d records readable, want 200", n)
			}
		})
	}
}

// TestAppendedBytesTrusted: bytes this process appended are served without a check, so a
// damage behind the log's back in them is not noticed by Read (the scrub finds it once the
// segment is sealed); bytes found at Open are checked once and then trusted.
func TestAppendedBytesTrusted(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir, testConfig())
	defer l.Close()
	mustAppend(t, l, batch(5, 40, "a", 1000))
	segs := l.mu.segs
	if got := segs[0].ours.Load(); got != 0 {
		t.Fatalf("a segment this process created: ours %d, want 0", got)
	}
}

// TestScrubFindsDamage: Scrub checks the segments (what Open found of them), reports the
// first damaged batch with its file and offset, calls pace for every batch, and once the log
// is truncated below the damage finds nothing.
func TestScrubFindsDamage(t *testing.T) {
	dir, batches, files := damageLog(t)
	var d damages
	cfg := testConfig()
	cfg.OnDamage = d.add
	l, _ := mustOpen(t, dir, cfg)
	var paced int64
	pace := func(n int64) error { paced += n; return nil }
	n, err := l.Scrub(pace)
	if err != nil {
		t.Fatalf("Scrub of a clean log: %v", err)
	}
	if n == 0 || n != paced {
		t.Fatalf("Scrub checked %d bytes, paced %d", n, paced)
	}
	sealed := l.mu.segs[:len(l.mu.segs)-1]
	for _, s := range sealed {
		if s.checked.Load() != s.size {
			t.Fatalf("segment %d checked to %d of %d after a clean scrub", s.base, s.checked.Load(), s.size)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	i := 12 // in a sealed segment, not the first
	if files[i] == files[len(files)-1] {
		t.Fatalf("batch %d is in the active segment: make the test log longer", i)
	}
	flip(t, files[i], batches[i].Position)
	l, _ = mustOpen(t, dir, cfg)
	defer l.Close()
	_, err = l.Scrub(nil)
	dmg := AsDamage(err)
	if dmg == nil || dmg.Offset != batches[i].Header.BaseOffset || dmg.File != files[i] {
		t.Fatalf("Scrub: %v, want the damage at offset %d of %s", err, batches[i].Header.BaseOffset, files[i])
	}
	if got := d.list(); len(got) != 1 || got[0] != *dmg {
		t.Fatalf("OnDamage got %+v, want %+v", got, *dmg)
	}
	stop := errors.New("stop")
	if _, err := l.Scrub(func(int64) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Scrub with a pace that fails: %v, want its error", err)
	}
	if err := l.TruncateTo(dmg.Offset); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Scrub(nil); err != nil {
		t.Fatalf("Scrub after truncating below the damage: %v", err)
	}
}
