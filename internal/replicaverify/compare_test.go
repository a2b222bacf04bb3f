package replicaverify

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/records"
)

// log builds n batches of 3 records each from offset 0, in leader epoch epoch.
func log(n int, epoch int32) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = records.AppendBatch(b, int64(3*i), epoch, 1000, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	}
	return b
}

// fixCRC recomputes the CRC-32C of the batch at the start of b (a valid, different batch).
func fixCRC(b []byte) {
	h, err := records.ParseHeader(b)
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:h.Size()], crc32.MakeTable(crc32.Castagnoli)))
}

// run compares the logs (one per replica, broker ids 0..n-1, replica 0 the reference) with
// each replica's HW, refilling from the whole log as Verify does from fetches.
func run(t *testing.T, logs [][]byte, hws []int64) (int64, *Divergence) {
	t.Helper()
	var cs []*Cursor
	for i := range logs {
		cs = append(cs, &Cursor{Broker: int32(i), HW: hws[i]})
	}
	fed := make([]bool, len(logs))
	verified := int64(0)
	for steps := 0; steps < 1000; steps++ {
		to, d, done, err := Step("t", 0, cs, 0)
		switch {
		case err == errNeedMore:
			for i, c := range cs {
				if len(c.Buf) == 0 && !c.Exhausted() {
					if fed[i] {
						c.Stuck = true
						continue
					}
					fed[i] = true
					c.Add(logs[i])
				}
			}
			continue
		case d != nil || done:
			return verified, d
		}
		verified = to
	}
	t.Fatal("no end")
	return 0, nil
}

func TestCompare(t *testing.T) {
	same := log(4, 0)
	changed := log(4, 0)
	// A record byte changed and the CRC fixed: a valid batch that differs (the 3rd, offsets 6..8).
	third := 2 * (len(changed) / 4)
	changed[len(changed)/4*2+records.HeaderSize+8] ^= 0xff
	fixCRC(changed[third:])
	flipped := log(4, 0)
	flipped[len(flipped)/4+records.HeaderSize+8] ^= 0x01 // 2nd batch, CRC left stale
	epoch := log(4, 0)
	records.SetPartitionLeaderEpoch(epoch[len(epoch)/4*3:], 7)
	short := log(3, 0)

	for _, tc := range []struct {
		name     string
		logs     [][]byte
		hws      []int64
		verified int64
		want     string // in the divergence; "" none
	}{
		{"identical", [][]byte{same, same, same}, []int64{12, 12, 12}, 12, ""},
		{"up to the smallest HW", [][]byte{same, same, short}, []int64{12, 12, 9}, 9, ""},
		{"a batch reaching the HW is not compared", [][]byte{same, same}, []int64{12, 10}, 9, ""},
		{"changed record, valid CRC", [][]byte{same, same, changed}, []int64{12, 12, 12}, 6, "replica 2 diverges from replica 0 at offset 6: checksum"},
		{"flipped byte", [][]byte{same, flipped, same}, []int64{12, 12, 12}, 3, "replica 1 has a corrupt batch at offset 3: crc mismatch in batch at baseOffset 3: stored"},
		{"flipped byte on the reference", [][]byte{flipped, same}, []int64{12, 12}, 3, "replica 0 has a corrupt batch at offset 3"},
		{"leader epoch", [][]byte{same, epoch}, []int64{12, 12}, 9, "leader epoch 7, want 0"},
		{"beyond the HW is not compared", [][]byte{same, changed}, []int64{12, 6}, 6, ""},
		{"empty", [][]byte{nil, nil}, []int64{0, 0}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, d := run(t, tc.logs, tc.hws)
			got := ""
			if d != nil {
				got = d.String()
			}
			if v != tc.verified || (tc.want == "") != (d == nil) || !strings.Contains(got, tc.want) {
				t.Errorf("verified %d, divergence %q; want %d and %q", v, got, tc.verified, tc.want)
			}
		})
	}
}

// TestCompareOffsets: batches that split the same offsets differently diverge at "offset".
func TestCompareOffsets(t *testing.T) {
	a := records.AppendBatch(nil, 0, 0, 1, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	b := records.AppendBatch(nil, 0, 0, 1, []records.Record{{Value: []byte("a")}})
	b = records.AppendBatch(b, 1, 0, 1, []records.Record{{Value: []byte("b")}})
	_, d := run(t, [][]byte{a, b}, []int64{2, 2})
	if d == nil || d.Field != "offset" || d.Offset != 0 || d.Want != "[0, 1]" || d.Got != "[0, 0]" {
		t.Fatalf("divergence %+v, want offset [0, 1] vs [0, 0] at 0", d)
	}
}

// TestParseBatches: a partial batch at the end of a fetch is left out, batches ending below
// the start are skipped.
func TestParseBatches(t *testing.T) {
	l := log(3, 0)
	got, ok := ParseBatches(nil, l[:len(l)-5], 4)
	if !ok || len(got) != 1 || got[0].BaseOffset != 3 {
		t.Fatalf("got %+v ok %v, want the batch at 3 only", got, ok)
	}
	got, ok = ParseBatches(nil, l[:10], 0)
	if !ok || len(got) != 0 {
		t.Fatalf("a partial header: %+v %v", got, ok)
	}
	bad := append([]byte(nil), l...)
	bad[11] = 1 // batchLength 1: below a header's
	if got, ok = ParseBatches(nil, bad, 0); ok || len(got) != 1 || got[0].Err == nil {
		t.Fatalf("a bad header: %+v %v", got, ok)
	}
	// A batch length too large looks like a partial batch: below the HW it is a corrupt log.
	huge := append([]byte(nil), l...)
	huge[8] = 0x70
	_, d := run(t, [][]byte{l, huge}, []int64{9, 9})
	if d == nil || d.Field != "corrupt" || d.Replica != 1 || d.Offset != 0 {
		t.Fatalf("a huge batch length: %+v", d)
	}
}

// TestReportMaxLag: ReplicaVerificationTool's "max lag" is the largest distance between a
// partition's highest replica HW and what was verified; unverified partitions are left out.
func TestReportMaxLag(t *testing.T) {
	r := &Report{Partitions: []Partition{
		{Topic: "a", Partition: 0, Verified: 10, Replicas: []Replica{{HW: 10}, {HW: 12}}},
		{Topic: "a", Partition: 1, Verified: 5, Replicas: []Replica{{HW: 9}, {HW: 5}}},
		{Topic: "b", Partition: 0, Verified: -1, Replicas: []Replica{{HW: 100, Err: "down"}}},
	}}
	lag, p, ok := r.MaxLag()
	if !ok || lag != 4 || p.Topic != "a" || p.Partition != 1 {
		t.Fatalf("max lag %d on %s-%d (%v), want 4 on a-1", lag, p.Topic, p.Partition, ok)
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max lag is 4 for partition a-1 at offset 5 among 3 partitions", "partition b-0: not verified", "partition b-0: replica 0 not checked: down"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
