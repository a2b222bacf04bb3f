package log

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/records"
)

// TestSegmentWalkerAgreesWithRecovery damages one segment in the ways recovery handles and
// checks that the walker's first invalid batch (or corrupt tail) is exactly where Open
// truncates the log, at the same offset and for the same reason.
func TestSegmentWalkerAgreesWithRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cases := []struct {
		name   string
		damage func(b []byte, pos []int) []byte
		bad    int    // index of the batch where the valid log ends; -1: none
		tail   bool   // the walk ends with a CorruptTailError at that batch
		reason string // in both the walker's error and Recovery.Reason
	}{
		{"clean", func(b []byte, _ []int) []byte { return b }, -1, false, ""},
		{"crc", func(b []byte, pos []int) []byte { b[pos[4]-1] ^= 1; return b }, 3, false, "crc mismatch"},
		{"gap", func(b []byte, pos []int) []byte { records.SetBaseOffset(b[pos[5]:], 1000); return b }, 5, false, "expected"},
		{"torn batch", func(b []byte, pos []int) []byte { return b[:len(b)-3] }, 7, true, "torn batch at"},
		{"torn header", func(b []byte, pos []int) []byte { return b[:pos[7]+10] }, 7, true, "torn batch header"},
		{"bad length", func(b []byte, pos []int) []byte { b[pos[2]+8] = 0x7f; return b }, 2, true, "batchLength"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := mustOpen(t, dir, cfg)
			var pos []int
			var next []int64 // offset after each batch
			size := 0
			for i := 0; i < 8; i++ {
				blob := batch(1+i%3, 30, "w", int64(i))
				info := mustAppend(t, l, blob)
				pos = append(pos, size)
				size += len(blob)
				next = append(next, info.LastOffset+1)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, segmentName(0, ".log"))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = tc.damage(b, pos)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			// Without a recovery point Open CRC-checks every batch, as the walker does by default.
			if err := os.Remove(filepath.Join(dir, RecoveryPointFile)); err != nil {
				t.Fatal(err)
			}

			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := NewSegmentWalker(f, filepath.Base(path), int64(len(b)), 0)
			firstBad, seen := -1, 0
			var why error
			for w.Next() {
				sb := w.Batch()
				if sb.Position != int64(pos[seen]) || sb.Size != int64(sb.Header.Size()) {
					t.Fatalf("batch %d at %d size %d, want position %d", seen, sb.Position, sb.Size, pos[seen])
				}
				if sb.Err != nil && firstBad < 0 {
					firstBad, why = seen, sb.Err
				}
				seen++
			}
			var tail *CorruptTailError
			if err := w.Err(); errors.As(err, &tail) {
				if !tc.tail || firstBad >= 0 || tail.Position != int64(pos[seen]) || tail.Bytes != int64(len(b)-pos[seen]) {
					t.Fatalf("tail %+v after %d batches; want a tail: %v", tail, seen, tc.tail)
				}
				firstBad, why = seen, tail
			} else if err != nil {
				t.Fatal(err)
			} else if tc.tail {
				t.Fatalf("walk ended cleanly after %d batches, want a corrupt tail", seen)
			}
			if firstBad != tc.bad {
				t.Fatalf("first invalid batch %d (%v), want %d", firstBad, why, tc.bad)
			}

			l2, rec := mustOpen(t, dir, cfg)
			defer l2.Close()
			if tc.bad < 0 {
				if rec.TruncatedAtOffset != -1 || l2.LEO() != next[7] || rec.Reason != "" {
					t.Fatalf("clean segment: recovery %+v, LEO %d", rec, l2.LEO())
				}
				return
			}
			wantLEO := int64(0)
			if tc.bad > 0 {
				wantLEO = next[tc.bad-1]
			}
			if l2.LEO() != wantLEO || rec.TruncatedAtOffset != wantLEO || rec.TruncatedBytes != int64(len(b)-pos[tc.bad]) {
				t.Fatalf("recovery %+v, LEO %d; the walker says the log ends at batch %d (offset %d, position %d)", rec, l2.LEO(), tc.bad, wantLEO, pos[tc.bad])
			}
			if !strings.Contains(rec.Reason, why.Error()) || !strings.Contains(why.Error(), tc.reason) {
				t.Fatalf("recovery reason %q, walker %q, want both to say %q", rec.Reason, why, tc.reason)
			}
		})
	}
}

// TestSegmentWalkerSkipCRC: below the SkipCRCBelow offset a damaged record goes unnoticed (as
// Open trusts what lies below its recovery point), at or above it the batch is invalid.
func TestSegmentWalkerSkipCRC(t *testing.T) {
	seg := records.AppendBatch(nil, 0, 0, 1, []records.Record{{Value: []byte("a")}})
	second := len(seg)
	seg = records.AppendBatch(seg, 1, 0, 2, []records.Record{{Value: []byte("b")}})
	seg[len(seg)-1] ^= 1
	for _, tc := range []struct {
		skipBelow int64
		valid     bool
	}{{0, false}, {1, false}, {2, true}} {
		w := NewSegmentWalker(strings.NewReader(string(seg)), "seg", int64(len(seg)), 0)
		w.SkipCRCBelow(tc.skipBelow)
		var last SegmentBatch
		for w.Next() {
			last = w.Batch()
		}
		if w.Err() != nil || last.Position != int64(second) || (last.Err == nil) != tc.valid {
			t.Errorf("SkipCRCBelow(%d): last batch %+v, walk error %v; want valid %v", tc.skipBelow, last, w.Err(), tc.valid)
		}
		if w.End() != int64(len(seg)) || w.NextOffset() != 2 {
			t.Errorf("SkipCRCBelow(%d): End %d NextOffset %d", tc.skipBelow, w.End(), w.NextOffset())
		}
	}
}

// FuzzSegmentWalker: on any file the walker never panics, returns batches back to back from
// position 0, and ends cleanly exactly at the end of the file or with a CorruptTailError at End.
func FuzzSegmentWalker(f *testing.F) {
	var good []byte
	for i := int64(0); i < 3; i++ {
		good = records.AppendBatch(good, 2*i, 0, 1, []records.Record{{Value: []byte("v")}, {Value: []byte("w")}})
	}
	f.Add(good, int64(0))
	f.Add(good[:len(good)-5], int64(0))
	f.Add(good[:20], int64(-1))
	f.Add([]byte{}, int64(7))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		w := NewSegmentWalker(strings.NewReader(string(b)), "fuzz.log", int64(len(b)), base)
		var at int64
		for w.Next() {
			sb := w.Batch()
			if sb.Position != at || sb.Size < records.HeaderSize || sb.Position+sb.Size > int64(len(b)) {
				t.Fatalf("batch at %d size %d, want position %d within %d bytes", sb.Position, sb.Size, at, len(b))
			}
			at += sb.Size
		}
		if w.End() != at {
			t.Fatalf("End %d, batches end at %d", w.End(), at)
		}
		var tail *CorruptTailError
		switch err := w.Err(); {
		case err == nil:
			if at != int64(len(b)) {
				t.Fatalf("clean end at %d of %d bytes", at, len(b))
			}
		case errors.As(err, &tail):
			if tail.Position != at || tail.Bytes != int64(len(b))-at || tail.Bytes == 0 {
				t.Fatalf("tail %+v, batches end at %d of %d", tail, at, len(b))
			}
		default:
			t.Fatalf("walk error on an in-memory file: %v", err)
		}
	})
}
