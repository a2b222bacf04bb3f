package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/isrbench/isrbench/core/vfs"
)

// TestTailWrite: the tail holds exactly the bytes written last, at least limit of them; a range
// it does not hold whole is refused (and dst left as it was); a write that does not continue
// it starts a new one; one larger than the limit empties it.
func TestTailWrite(t *testing.T) {
	const limit = 10000
	var tl tail
	tl.write(0, [][]byte{[]byte("not wanted yet")}, limit)
	if tl.load() != nil {
		t.Fatal("a tail no read asked for was kept")
	}
	if _, ok := tl.appendTo(nil, 0, 1); ok || !tl.wanted.Load() {
		t.Fatal("a read the tail could not serve did not ask for it")
	}
	var file []byte // what the segment holds
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(off int64, n int) {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		file = append(file[:off], b...)
		// Split into up to three buffers, as a group commit's pwritev.
		cut1, cut2 := rng.IntN(n+1), rng.IntN(n+1)
		cut1, cut2 = min(cut1, cut2), max(cut1, cut2)
		tl.write(off, [][]byte{b[:cut1], b[cut1:cut2], b[cut2:]}, limit)
	}
	check := func(when string) {
		t.Helper()
		s := tl.load()
		if s == nil {
			t.Fatalf("%s: no tail", when)
		}
		end := s.end.Load()
		if end != int64(len(file)) {
			t.Fatalf("%s: tail ends at %d, the segment at %d", when, end, len(file))
		}
		if end-s.start > limit+2*int64(tailChunkMax(limit)) {
			t.Fatalf("%s: tail holds %d bytes, limit %d", when, end-s.start, limit)
		}
		for i := 0; i < 50; i++ {
			pos := s.start + rng.Int64N(end-s.start+1)
			n := rng.Int64N(end - pos + 1)
			got, ok := s.appendTo([]byte("x"), pos, n)
			if !ok || !bytes.Equal(got[1:], file[pos:pos+n]) || got[0] != 'x' {
				t.Fatalf("%s: bytes [%d, %d) from the tail differ (ok %v)", when, pos, pos+n, ok)
			}
		}
		if s.start > 0 {
			if got, ok := s.appendTo([]byte("x"), s.start-1, 2); ok || string(got) != "x" {
				t.Fatalf("%s: a range starting before the tail was served", when)
			}
		}
		if _, ok := s.appendTo(nil, end-1, 2); ok {
			t.Fatalf("%s: a range past the end was served", when)
		}
	}
	for i := 0; i < 200; i++ {
		write(int64(len(file)), 1+rng.IntN(3000))
		check(fmt.Sprintf("after write %d", i))
	}
	// A truncation, then a write at the new end: a new tail.
	old := tl.load()
	write(int64(len(file))-500, 100)
	if s := tl.load(); s == old || s.start != int64(len(file))-100 {
		t.Fatalf("after a truncation the tail starts at %d, want %d (a new one)", s.start, len(file)-100)
	}
	check("after the truncation")
	if got, ok := old.appendTo(nil, old.end.Load()-10, 10); !ok || len(got) != 10 {
		t.Fatal("an old snapshot no longer reads its own bytes")
	}
	// A write larger than the limit empties the tail.
	write(int64(len(file)), limit+1)
	if tl.load() != nil {
		t.Fatal("a write larger than the limit left a tail")
	}
	var off *tailSnap
	if _, ok := off.appendTo(nil, 0, 1); ok {
		t.Fatal("no tail served bytes")
	}
}

// TestReadAllFromTail: once a read asked for the tail, a Log's recent batches are copied from
// it (no pread), older ones are read from the file, and both give the file's bytes; across
// segment rolls and a truncation. With isrbench.log.tail.bytes 0 every ReadAll reads the file.
func TestReadAllFromTail(t *testing.T) {
	for _, tailBytes := range []int64{2048, 0} {
		t.Run(fmt.Sprintf("tail.bytes=%d", tailBytes), func(t *testing.T) {
			var counts vfs.Counters
			cfg := testConfig() // 4 KiB segments
			cfg.TailBytes = tailBytes
			cfg.FS = vfs.NewOS(&counts)
			l, _ := mustOpen(t, t.TempDir(), cfg)
			defer l.Close()
			check := func(offset int64, wantMem bool) {
				t.Helper()
				s, err := l.Read(offset, l.LEO(), 1<<20, true)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Release()
				want := make([]byte, s.Size)
				if _, err := s.File.ReadAt(want, s.Pos); err != nil {
					t.Fatal(err)
				}
				before := counts.Syscalls().Pread
				got, err := s.ReadAll(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("offset %d: ReadAll differs from the file", offset)
				}
				preads := counts.Syscalls().Pread - before
				if wantMem && preads != 0 || !wantMem && preads == 0 {
					t.Fatalf("offset %d: %d preads (from the tail: %v)", offset, preads, wantMem)
				}
			}
			check(mustAppend(t, l, batch(2, 100, "first", 1000)).FirstOffset, false) // asks for the tail
			for i := 0; i < 40; i++ {
				info := mustAppend(t, l, batch(2, 100, fmt.Sprintf("b%d", i), 1000))
				check(info.FirstOffset, tailBytes > 0)
			}
			check(0, false) // rolled away long ago
			if err := l.TruncateTo(l.LEO() - 4); err != nil {
				t.Fatal(err)
			}
			info := mustAppend(t, l, batch(3, 50, "after", 1000))
			check(info.FirstOffset, tailBytes > 0)
		})
	}
}
