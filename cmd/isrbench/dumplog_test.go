package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

// dumpLogSegment is three batches (offsets 0-2, 3, 4-5; leader epochs 1, 1, 2) as a leader
// writes them: the bytes of a segment file starting at offset 0, and each batch's position.
func dumpLogSegment() (seg []byte, pos []int) {
	rec := func(vals ...string) []records.Record {
		out := make([]records.Record, len(vals))
		for i, v := range vals {
			out[i] = records.Record{Key: []byte("k"), Value: []byte(v)}
		}
		return out
	}
	seg = records.AppendBatch(seg, 0, 1, 1700000000000, rec("a", "b", "c"))
	pos = append(pos, 0, len(seg))
	seg = records.AppendBatch(seg, 3, 1, 1700000000100, rec("d"))
	pos = append(pos, len(seg))
	seg = records.AppendBatch(seg, 4, 2, 1700000000200, rec("e", "f"))
	return seg, pos
}

// txnSegment is a transactional batch of producer 7 (offsets 0-1), its COMMIT marker (2), a
// second transaction (3) and its ABORT marker (4), from coordinator epoch 3.
func txnSegment() []byte {
	recs := []records.Record{{Value: []byte("x")}, {Value: []byte("y")}}
	seg := records.AppendTxnBatch(nil, 7, 1, 1700000000000, recs)
	seg = records.AppendControlBatch(seg, 7, 1, 3, true, 1700000000001)
	seg = records.AppendTxnBatch(seg, 7, 1, 1700000000002, recs[:1])
	seg = records.AppendControlBatch(seg, 7, 1, 3, false, 1700000000003)
	b, off := seg, int64(0)
	for len(b) > 0 {
		h, _ := records.ParseHeader(b)
		records.SetBaseOffset(b, off)
		off = h.LastOffset() - h.BaseOffset + off + 1
		b = b[h.Size():]
	}
	return seg
}

// TestDumpLogGolden dumps a valid segment and damaged copies of it (a flipped record byte, a
// torn tail, an offset gap, a file not named like a segment) against golden output, and checks
// the exit status.
// txnIndexFile is a .txnindex of two aborted transactions.
func txnIndexFile() []byte {
	b := log.AppendTxnIndexEntry(nil, log.AbortedTxn{ProducerID: 7, FirstOffset: 2, LastOffset: 9, LastStableOffset: 4})
	return log.AppendTxnIndexEntry(b, log.AbortedTxn{ProducerID: 4, FirstOffset: 4, LastOffset: 12, LastStableOffset: 13})
}

func TestDumpLogGolden(t *testing.T) {
	seg, pos := dumpLogSegment()
	dir := t.TempDir()
	cases := []struct {
		name   string
		file   string
		damage func([]byte) []byte
		code   int
	}{
		{"valid", "00000000000000000000.log", nil, 0},
		{"crc", "00000000000000000000.log", func(b []byte) []byte { b[pos[2]-1] ^= 0xff; return b }, 1},
		{"torn", "00000000000000000000.log", func(b []byte) []byte { return b[:len(b)-5] }, 1},
		{"torn-header", "00000000000000000000.log", func(b []byte) []byte { return b[:pos[2]+20] }, 1},
		{"gap", "00000000000000000000.log", func(b []byte) []byte { records.SetBaseOffset(b[pos[2]:], 9); return b }, 1},
		{"base", "00000000000000000003.log", nil, 1},
		{"unnamed", "copy.log", nil, 0},
		{"bad-header", "00000000000000000000.log", func(b []byte) []byte { b[pos[1]+16] = 1; return b }, 1}, // magic 1
		{"txn", "00000000000000000000.log", func(b []byte) []byte { return txnSegment() }, 0},
		{"txnindex", "00000000000000000000.txnindex", func([]byte) []byte { return txnIndexFile() }, 0},
		{"txnindex-torn", "00000000000000000000.txnindex", func([]byte) []byte { b := txnIndexFile(); return b[:len(b)-3] }, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), seg...)
			if tc.damage != nil {
				b = tc.damage(b)
			}
			sub := filepath.Join(dir, tc.name)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(sub, tc.file)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := exitCode(run(context.Background(), []string{"dump-log", path}, &stdout, &stderr), &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			got := strings.ReplaceAll(stdout.String()+"--- stderr\n"+stderr.String(), sub, "DIR")
			golden := filepath.Join("testdata", "dump-log-"+tc.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestDumpLogGolden -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test -run TestDumpLogGolden -update to accept):\n%s", golden, got)
			}
		})
	}
}

// TestDumpLogUsage: no path, two paths, a directory and a missing file are refused.
func TestDumpLogUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dump-log"}, 2, "exactly one segment file path"},
		{[]string{"dump-log", "a.log", "b.log"}, 2, "exactly one segment file path"},
		{[]string{"dump-log", dir}, 2, "is a directory"},
		{[]string{"dump-log", filepath.Join(dir, "nope.log")}, 1, "nope.log"},
	} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stdout, &stderr), &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
