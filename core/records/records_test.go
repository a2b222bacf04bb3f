package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k0"), Value: []byte("v0")},
		{Key: nil, Value: []byte("value with null key"), TimestampDelta: 5},
		{Key: []byte{}, Value: nil, TimestampDelta: 3, Headers: []RecordHeader{{Key: "h", Value: []byte("hv")}, {Key: "", Value: nil}}},
		{Key: []byte("k3"), Value: bytes.Repeat([]byte{0xab}, 300), TimestampDelta: -2},
	}
}

func TestAppendBatchHeader(t *testing.T) {
	b := AppendBatch([]byte("prefix"), 100, 7, 1_700_000_000_000, sampleRecords())
	if string(b[:6]) != "prefix" {
		t.Fatalf("prefix clobbered")
	}
	b = b[6:]
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Header{BaseOffset: 100, BatchLength: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2, CRC: h.CRC,
		LastOffsetDelta: 3, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_005, ProducerID: -1,
		ProducerEpoch: -1, BaseSequence: -1, RecordsCount: 4}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 103 || h.NextOffset() != 104 {
		t.Fatalf("Size/LastOffset/NextOffset = %d/%d/%d", h.Size(), h.LastOffset(), h.NextOffset())
	}
	if h.Compression() != 0 || h.IsTransactional() || h.IsControl() {
		t.Fatalf("attributes decoded wrong: %+v", h)
	}
}

// TestAppendBatchDecodedByKmsg cross-checks the builder against franz-go's decoder.
func TestAppendBatchDecodedByKmsg(t *testing.T) {
	recs := sampleRecords()
	b := AppendBatch(nil, 42, 3, 1000, recs)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	if rb.FirstOffset != 42 || rb.PartitionLeaderEpoch != 3 || rb.Magic != 2 || rb.NumRecords != 4 || rb.LastOffsetDelta != 3 ||
		rb.FirstTimestamp != 1000 || rb.MaxTimestamp != 1005 || rb.ProducerID != -1 || int(rb.Length) != len(b)-12 {
		t.Fatalf("kmsg decoded %+v", rb)
	}
	if got := crc32.Checksum(b[21:], castagnoli); uint32(rb.CRC) != got {
		t.Fatalf("kmsg CRC %#x, want %#x", uint32(rb.CRC), got)
	}
	raw := rb.Records
	for i, want := range recs {
		var r kmsg.Record
		if err := r.ReadFrom(raw); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.OffsetDelta != int32(i) || r.TimestampDelta64 != want.TimestampDelta && int64(r.TimestampDelta) != want.TimestampDelta {
			t.Fatalf("record %d deltas: %+v", i, r)
		}
		if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) || !bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
			t.Fatalf("record %d key/value: got %q/%q want %q/%q", i, r.Key, r.Value, want.Key, want.Value)
		}
		if len(r.Headers) != len(want.Headers) {
			t.Fatalf("record %d headers: %+v", i, r.Headers)
		}
		for j, h := range want.Headers {
			if r.Headers[j].Key != h.Key || !bytes.Equal(r.Headers[j].Value, h.Value) {
				t.Fatalf("record %d header %d: %+v", i, j, r.Headers[j])
			}
		}
		n := varintLen(int64(r.Length)) + int(r.Length)
		raw = raw[n:]
	}
	if len(raw) != 0 {
		t.Fatalf("%d bytes left after records", len(raw))
	}
}

// TestKmsgBatchReadByForEachRecord cross-checks the reader against franz-go's encoder.
func TestKmsgBatchReadByForEachRecord(t *testing.T) {
	var raw []byte
	type kv struct{ k, v string }
	want := []kv{{"a", "1"}, {"bb", "22"}, {"", "333"}}
	for i, w := range want {
		r := kmsg.NewRecord()
		r.Key, r.Value = []byte(w.k), []byte(w.v)
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(10 * i)
		r.Headers = []kmsg.Header{{Key: "x", Value: []byte("y")}}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // body was written with Length 0 (1 varint byte)
		raw = append(raw, r.AppendTo(nil)...)
	}
	rb := kmsg.NewRecordBatch()
	rb.FirstOffset, rb.PartitionLeaderEpoch, rb.Magic = 500, 9, 2
	rb.LastOffsetDelta, rb.FirstTimestamp, rb.MaxTimestamp = 2, 2000, 2020
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = -1, -1, -1
	rb.NumRecords = 3
	rb.Records = raw
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	var got []kv
	var offs, tss []int64
	err := ForEachRecord(b, func(off, ts int64, k, v []byte) error {
		got = append(got, kv{string(k), string(v)})
		offs, tss = append(offs, off), append(tss, ts)
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachRecord: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(offs) != "[500 501 502]" || fmt.Sprint(tss) != "[2000 2010 2020]" {
		t.Fatalf("got %v offsets %v timestamps %v", got, offs, tss)
	}
}

func TestForEachRecordRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := AppendBatch(nil, 7, 0, 50, recs)
	i := 0
	err := ForEachRecord(b, func(off, ts int64, k, v []byte) error {
		if off != int64(7+i) || ts != 50+recs[i].TimestampDelta || !bytes.Equal(k, recs[i].Key) || (k == nil) != (recs[i].Key == nil) ||
			!bytes.Equal(v, recs[i].Value) || (v == nil) != (recs[i].Value == nil) {
			t.Errorf("record %d: off %d ts %d k %q v %q", i, off, ts, k, v)
		}
		i++
		return nil
	})
	if err != nil || i != len(recs) {
		t.Fatalf("err %v, %d records", err, i)
	}
	stop := errors.New("stop")
	if err := ForEachRecord(b, func(int64, int64, []byte, []byte) error { return stop }); err != stop {
		t.Fatalf("callback error not returned: %v", err)
	}
	empty := AppendBatch(nil, 0, 0, 0, nil)
	if h, err := Validate(empty); err != nil || h.RecordsCount != 0 || h.Size() != HeaderSize {
		t.Fatalf("empty batch: %+v %v", h, err)
	}
}

func TestSetFieldsKeepCRC(t *testing.T) {
	b := AppendBatch(nil, 0, -1, 1, sampleRecords())
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 77)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("Validate after patch: %v", err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 77 {
		t.Fatalf("patched header %+v", h)
	}
}

func TestValidateErrors(t *testing.T) {
	good := AppendBatch(nil, 10, 1, 1, sampleRecords())
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	put32 := func(at int, v int32) []byte {
		return mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[at:], uint32(v)); return b })
	}
	tests := []struct {
		name  string
		b     []byte
		kind  error
		field string
	}{
		{"short header", good[:HeaderSize-1], kerr.CorruptMessage, "header truncated"},
		{"bad magic", mut(func(b []byte) []byte { b[16] = 1; return b }), kerr.InvalidRecord, "magic"},
		{"batchLength too small", put32(8, 48), kerr.CorruptMessage, "batchLength"},
		{"batchLength negative", put32(8, -1), kerr.CorruptMessage, "batchLength"},
		{"batchLength past data", put32(8, int32(len(good))), kerr.CorruptMessage, "truncated"},
		{"torn batch", good[:len(good)-1], kerr.CorruptMessage, "truncated"},
		{"negative lastOffsetDelta", put32(23, -1), kerr.InvalidRecord, "lastOffsetDelta"},
		{"recordsCount too big", put32(57, 5), kerr.InvalidRecord, "recordsCount"},
		{"recordsCount negative", put32(57, -3), kerr.InvalidRecord, "recordsCount"},
		{"negative baseOffset", mut(func(b []byte) []byte { SetBaseOffset(b, -5); return b }), kerr.InvalidRecord, "baseOffset"},
		{"offset overflow", mut(func(b []byte) []byte { SetBaseOffset(b, 1<<63-2); return b }), kerr.InvalidRecord, "overflows"},
		{"unknown codec", mut(func(b []byte) []byte { b[22] |= 7; return b }), kerr.InvalidRecord, "compression"},
		{"crc flipped", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), kerr.CorruptMessage, "crc mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.b)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error %v does not wrap %v", err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %q", err, tt.field)
			}
		})
	}
	// ParseHeader alone ignores the CRC and needs only the header.
	if _, err := ParseHeader(good[:HeaderSize]); err != nil {
		t.Fatalf("ParseHeader on header bytes: %v", err)
	}
}

func TestSplit(t *testing.T) {
	var blob []byte
	for i := 0; i < 3; i++ {
		blob = AppendBatch(blob, int64(i*4), 0, 1, sampleRecords())
	}
	var bases []int64
	err := Split(blob, func(b []byte, h Header) error {
		if len(b) != h.Size() || cap(b) != len(b) {
			t.Errorf("batch slice len %d cap %d size %d", len(b), cap(b), h.Size())
		}
		bases = append(bases, h.BaseOffset)
		return nil
	})
	if err != nil || fmt.Sprint(bases) != "[0 4 8]" {
		t.Fatalf("Split: %v %v", bases, err)
	}
	err = Split(append(blob, 1, 2, 3), func([]byte, Header) error { return nil })
	if !errors.Is(err, kerr.CorruptMessage) || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", len(blob))) {
		t.Fatalf("trailing partial batch: %v", err)
	}
	if err := Split(nil, func([]byte, Header) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestForEachRecordErrors(t *testing.T) {
	b := AppendBatch(nil, 0, 0, 0, sampleRecords())
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[21:], CompressionZstd)
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], castagnoli))
	if err := ForEachRecord(c, func(int64, int64, []byte, []byte) error { return nil }); !errors.Is(err, ErrCompressed) {
		t.Fatalf("compressed: %v", err)
	}
	// recordsCount 3 while 4 records are present: trailing bytes.
	d := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(d[57:], 3)
	binary.BigEndian.PutUint32(d[17:], crc32.Checksum(d[21:], castagnoli))
	if err := ForEachRecord(d, func(int64, int64, []byte, []byte) error { return nil }); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("count mismatch: %v", err)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(AppendBatch(nil, 1, 2, 3, sampleRecords()))
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h.Size() < HeaderSize || h.NextOffset() <= h.BaseOffset || h.Magic != 2 {
			t.Fatalf("accepted inconsistent header %+v", h)
		}
		if _, err := Validate(b); err == nil && h.Size() > len(b) {
			t.Fatalf("Validate accepted a batch longer than its bytes")
		}
	})
}

func FuzzSplit(f *testing.F) {
	two := AppendBatch(AppendBatch(nil, 0, 0, 0, sampleRecords()), 4, 0, 0, nil)
	f.Add(two)
	f.Add(two[:len(two)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		err := Split(b, func(batch []byte, h Header) error {
			total += len(batch)
			_ = ForEachRecord(batch, func(int64, int64, []byte, []byte) error { return nil })
			return nil
		})
		if err == nil && total != len(b) {
			t.Fatalf("Split succeeded but covered %d of %d bytes", total, len(b))
		}
	})
}

func FuzzForEachRecord(f *testing.F) {
	f.Add(AppendBatch(nil, 0, 0, 0, sampleRecords()))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Re-stamp the CRC so the fuzzer reaches the record decoder.
		if len(b) >= HeaderSize {
			h, err := ParseHeader(b)
			if err == nil && h.Size() <= len(b) {
				binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:h.Size()], castagnoli))
			}
		}
		_ = ForEachRecord(b, func(int64, int64, []byte, []byte) error { return nil })
	})
}

func BenchmarkValidate16KiB(b *testing.B) {
	recs := make([]Record, 16)
	for i := range recs {
		recs[i].Value = make([]byte, 1000)
	}
	batch := AppendBatch(nil, 0, 0, 0, recs)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAppendBatchNoAllocWithCapacity(t *testing.T) {
	recs := sampleRecords()
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendBatch(buf[:0], 0, 0, 0, recs) }); n != 0 {
		t.Fatalf("AppendBatch allocates %v times with enough capacity", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Validate(buf) }); n != 0 {
		t.Fatalf("Validate allocates %v times", n)
	}
}
