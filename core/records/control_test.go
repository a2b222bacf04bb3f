package records

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestControlBatchRoundTrip(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := AppendControlBatch(nil, 4242, 7, 3, commit, 1700)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 4242 || h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.RecordsCount != 1 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseMarker(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Commit() != commit || m.CoordinatorEpoch != 3 {
			t.Fatalf("marker %+v (commit %v)", m, commit)
		}
		// Kafka's own decoder (kmsg) reads the same batch and control record.
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes&0x20 == 0 || rb.ProducerID != 4242 {
			t.Fatalf("kmsg batch %+v", rb)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var key kmsg.EndTxnMarker // the value; the key is version + type
		if err := key.ReadFrom(rec.Value); err != nil || key.CoordinatorEpoch != 3 {
			t.Fatalf("kmsg marker value %+v: %v", key, err)
		}
		typ := int16(rec.Key[2])<<8 | int16(rec.Key[3])
		if (typ == ControlCommit) != commit {
			t.Fatalf("key type %d, commit %v", typ, commit)
		}
	}
}

func TestParseControlRecordErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		key, value []byte
	}{
		{"null key", nil, []byte{0, 0, 0, 0, 0, 1}},
		{"short key", []byte{0, 0, 0}, []byte{0, 0, 0, 0, 0, 1}},
		{"negative key version", []byte{0xff, 0xff, 0, 1}, []byte{0, 0, 0, 0, 0, 1}},
		{"unknown type", []byte{0, 0, 0, 5}, []byte{0, 0, 0, 0, 0, 1}},
		{"short value", []byte{0, 0, 0, 1}, []byte{0, 0, 0}},
		{"negative value version", []byte{0, 0, 0, 1}, []byte{0x80, 0, 0, 0, 0, 1}},
	} {
		if _, err := ParseControlRecord(c.key, c.value); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("%s: err %v, want CORRUPT_MESSAGE", c.name, err)
		}
	}
	if _, err := ParseMarker(AppendBatch(nil, 0, 0, 0, sampleRecords())); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("data batch: %v, want INVALID_RECORD", err)
	}
}

func FuzzParseControlRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 9})
	f.Add([]byte{0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m, err := ParseControlRecord(key, value)
		if err == nil && m.Type != ControlAbort && m.Type != ControlCommit {
			t.Fatalf("accepted type %d", m.Type)
		}
	})
}

func FuzzParseMarker(f *testing.F) {
	f.Add(AppendControlBatch(nil, 1, 0, 0, true, 0))
	f.Add(AppendControlBatch(nil, 9, 2, 5, false, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMarker(b)
		if err == nil && m.String() == "" {
			t.Fatal("empty name")
		}
	})
}
